//! Goodput: requests that meet every service level objective (`--goodput`).

use super::catalog::{self, CATALOG, MetricDef, MetricKind};

/// One service level objective: a record metric and its threshold in display units
/// (ms for latencies, tokens/sec/user for per-user throughput).
#[derive(Debug, Clone, PartialEq)]
pub struct GoodputSlo {
    pub tag: String,
    pub threshold: f64,
}

/// Metrics a goodput objective may name: per-request scalars computed for valid requests.
fn accepts(def: &MetricDef) -> bool {
    def.kind == MetricKind::Record
        && !def.error_only
        && def.id != catalog::MetricId::InterChunkLatency
}

fn accepted_tags() -> String {
    CATALOG
        .iter()
        .filter(|d| accepts(d))
        .map(|d| d.tag)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses AIPerf's `--goodput "request_latency:250 inter_token_latency:10"`: space-separated
/// `tag:value` pairs (commas are accepted as separators too).
pub fn parse_goodput(spec: &str) -> Result<Vec<GoodputSlo>, String> {
    let mut slos: Vec<GoodputSlo> = Vec::new();
    for piece in spec
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|p| !p.is_empty())
    {
        let Some((tag, value)) = piece.split_once(':') else {
            return Err(format!(
                "invalid goodput objective '{piece}': expected METRIC:VALUE, e.g. request_latency:250"
            ));
        };
        let def = catalog::by_tag(tag).filter(|d| accepts(d)).ok_or_else(|| {
            format!(
                "invalid goodput objective '{piece}': unknown metric '{tag}'; known metrics: {}",
                accepted_tags()
            )
        })?;
        let threshold: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                format!(
                    "invalid goodput objective '{piece}': '{value}' is not a non-negative number (in {})",
                    def.unit
                )
            })?;
        if slos.iter().any(|s| s.tag == tag) {
            return Err(format!(
                "invalid goodput objective '{piece}': '{tag}' is given more than once"
            ));
        }
        slos.push(GoodputSlo {
            tag: tag.to_string(),
            threshold,
        });
    }
    if slos.is_empty() {
        return Err("empty goodput specification: expected METRIC:VALUE pairs, e.g. \"request_latency:250 inter_token_latency:10\"".into());
    }
    Ok(slos)
}

/// A parsed objective resolved against the catalogue, threshold in base units.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Objective {
    pub def: &'static MetricDef,
    pub threshold_base: f64,
}

impl Objective {
    pub fn resolve(slos: &[GoodputSlo]) -> Vec<Objective> {
        slos.iter()
            .filter_map(|s| {
                let def = catalog::by_tag(&s.tag).filter(|d| accepts(d))?;
                Some(Objective {
                    def,
                    threshold_base: s.threshold * def.scale,
                })
            })
            .collect()
    }

    /// Larger-is-better metrics pass at or above the threshold, the others at or below.
    /// A missing value never passes.
    pub fn passes(&self, value: Option<f64>) -> bool {
        match value {
            None => false,
            Some(v) if self.def.larger_is_better => v >= self.threshold_base,
            Some(v) => v <= self.threshold_base,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_in_order() {
        let slos = parse_goodput("request_latency:250 inter_token_latency:10.5").unwrap();
        assert_eq!(
            slos,
            vec![
                GoodputSlo {
                    tag: "request_latency".into(),
                    threshold: 250.0
                },
                GoodputSlo {
                    tag: "inter_token_latency".into(),
                    threshold: 10.5
                },
            ]
        );
        assert_eq!(
            parse_goodput("  time_to_first_token:100, ").unwrap().len(),
            1
        );
    }

    #[test]
    fn errors_name_the_bad_piece() {
        let e = parse_goodput("request_latency:250 latency:3").unwrap_err();
        assert!(e.contains("'latency:3'"), "{e}");
        assert!(
            e.contains("time_to_first_token"),
            "lists known metrics: {e}"
        );

        let e = parse_goodput("request_latency").unwrap_err();
        assert!(e.contains("METRIC:VALUE"), "{e}");

        let e = parse_goodput("request_latency:fast").unwrap_err();
        assert!(e.contains("'fast'") && e.contains("ms"), "{e}");

        let e = parse_goodput("request_latency:-1").unwrap_err();
        assert!(e.contains("non-negative"), "{e}");

        let e = parse_goodput("request_latency:1 request_latency:2").unwrap_err();
        assert!(e.contains("more than once"), "{e}");

        assert!(parse_goodput("   ").is_err());
        // Run-level metrics have no per-request value to judge.
        assert!(parse_goodput("request_throughput:5").is_err());
    }

    #[test]
    fn direction_follows_larger_is_better() {
        let slos =
            parse_goodput("request_latency:250 output_token_throughput_per_user:100").unwrap();
        let obj = Objective::resolve(&slos);
        // 250 ms = 250e6 ns.
        assert!(obj[0].passes(Some(250e6)));
        assert!(!obj[0].passes(Some(250e6 + 1.0)));
        assert!(obj[1].passes(Some(100.0)));
        assert!(!obj[1].passes(Some(99.9)));
        assert!(!obj[0].passes(None));
    }
}
