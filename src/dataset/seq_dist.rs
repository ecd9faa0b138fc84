//! `--seq-dist`: input/output length pairs drawn by probability, in AIPerf's three
//! spellings:
//! - `ISL,OSL:PROB;ISL,OSL:PROB` (each length optionally `MEAN|STDDEV`),
//! - `[(ISL,OSL):PROB,(ISL,OSL):PROB]`,
//! - `{"pairs": [{"isl": .., "osl": .., "prob": .., "isl_stddev": .., "osl_stddev": ..}]}`.
//!
//! Probabilities are percentages summing to 100. A length with a stddev is drawn from a
//! normal distribution and rounded, at least 1.

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Normal};
use serde::Deserialize;

/// One pair and its share of the turns.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SeqPair {
    pub isl: f64,
    #[serde(default)]
    pub isl_stddev: f64,
    pub osl: f64,
    #[serde(default)]
    pub osl_stddev: f64,
    /// Percent.
    pub prob: f64,
}

/// The pairs, with their cumulative shares for drawing.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqDist {
    pairs: Vec<SeqPair>,
    cumulative: Vec<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonForm {
    pairs: Vec<SeqPair>,
}

/// Largest length a pair may ask for, in tokens.
const MAX_LENGTH: f64 = super::MAX_INPUT_TOKENS as f64;

impl SeqDist {
    /// Parses any of the three spellings. The error says what is wrong, without the flag.
    pub fn parse(text: &str) -> Result<SeqDist, String> {
        let text = text.trim();
        let pairs = if text.starts_with('{') {
            serde_json::from_str::<JsonForm>(text)
                .map_err(|e| format!("not valid JSON of the form {{\"pairs\": [{{\"isl\": 256, \"osl\": 128, \"prob\": 60}}, ...]}}: {e}"))?
                .pairs
        } else if let Some(inner) = text.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or("the bracket form must end with ']'")?;
            inner
                .split('(')
                .map(|p| p.trim().trim_end_matches(',').trim())
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (lengths, prob) = p
                        .split_once("):")
                        .ok_or_else(|| format!("'({p}' is not of the form (ISL,OSL):PROB"))?;
                    pair(lengths, prob)
                })
                .collect::<Result<Vec<_>, _>>()?
        } else {
            text.split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (lengths, prob) = p
                        .rsplit_once(':')
                        .ok_or_else(|| format!("'{p}' is not of the form ISL,OSL:PROB"))?;
                    pair(lengths, prob)
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        SeqDist::new(pairs)
    }

    fn new(pairs: Vec<SeqPair>) -> Result<SeqDist, String> {
        if pairs.is_empty() {
            return Err("no pairs; give e.g. \"256,128:60;512,256:40\"".into());
        }
        for p in &pairs {
            for (what, v) in [("ISL", p.isl), ("OSL", p.osl)] {
                if !(v.is_finite() && (1.0..=MAX_LENGTH).contains(&v)) {
                    return Err(format!(
                        "{what} {v} is not allowed; give 1 to {MAX_LENGTH} tokens"
                    ));
                }
            }
            for v in [p.isl_stddev, p.osl_stddev] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(format!("stddev {v} is not allowed; give a number >= 0"));
                }
            }
            if !(p.prob.is_finite() && p.prob > 0.0) {
                return Err(format!(
                    "probability {} is not allowed; give a percentage > 0",
                    p.prob
                ));
            }
        }
        let total: f64 = pairs.iter().map(|p| p.prob).sum();
        if (total - 100.0).abs() > 1e-6 {
            return Err(format!(
                "the probabilities add up to {total}, not 100; give percentages that sum to 100"
            ));
        }
        let cumulative = pairs
            .iter()
            .scan(0.0, |sum, p| {
                *sum += p.prob / 100.0;
                Some(*sum)
            })
            .collect();
        Ok(SeqDist { pairs, cumulative })
    }

    /// Draws a pair (the first whose cumulative share exceeds a uniform draw), then its
    /// input and output lengths.
    pub fn sample(&self, rng: &mut impl Rng) -> (u64, u64) {
        let u: f64 = rng.random();
        let i = self
            .cumulative
            .iter()
            .position(|&c| c > u)
            .unwrap_or(self.pairs.len() - 1);
        let p = &self.pairs[i];
        (
            length(p.isl, p.isl_stddev, rng),
            length(p.osl, p.osl_stddev, rng),
        )
    }
}

fn length(mean: f64, stddev: f64, rng: &mut impl Rng) -> u64 {
    let x = if stddev > 0.0 {
        Normal::new(mean, stddev)
            .expect("checked finite")
            .sample(rng)
    } else {
        mean
    };
    (x.round().min(MAX_LENGTH) as u64).max(1)
}

/// `ISL[|SD],OSL[|SD]` and `PROB`.
fn pair(lengths: &str, prob: &str) -> Result<SeqPair, String> {
    let (isl, osl) = lengths
        .split_once(',')
        .ok_or_else(|| format!("'{lengths}' is not of the form ISL,OSL"))?;
    let (isl, isl_stddev) = mean_stddev(isl)?;
    let (osl, osl_stddev) = mean_stddev(osl)?;
    Ok(SeqPair {
        isl,
        isl_stddev,
        osl,
        osl_stddev,
        prob: number(prob)?,
    })
}

fn mean_stddev(s: &str) -> Result<(f64, f64), String> {
    match s.split_once('|') {
        Some((mean, sd)) => Ok((number(mean)?, number(sd)?)),
        None => Ok((number(s)?, 0.0)),
    }
}

fn number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .map_err(|_| format!("'{}' is not a number", s.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::ChaCha8Rng;

    fn p(isl: f64, isl_stddev: f64, osl: f64, osl_stddev: f64, prob: f64) -> SeqPair {
        SeqPair {
            isl,
            isl_stddev,
            osl,
            osl_stddev,
            prob,
        }
    }

    #[test]
    fn the_three_spellings_give_the_same_pairs() {
        let want = vec![
            p(256.0, 10.0, 128.0, 5.0, 60.0),
            p(512.0, 0.0, 256.0, 0.0, 40.0),
        ];
        for text in [
            "256|10,128|5:60;512,256:40",
            " 256|10,128|5:60; 512,256:40; ",
            "[(256|10,128|5):60,(512,256):40]",
            r#"{"pairs": [{"isl": 256, "isl_stddev": 10, "osl": 128, "osl_stddev": 5, "prob": 60}, {"isl": 512, "osl": 256, "prob": 40}]}"#,
        ] {
            assert_eq!(SeqDist::parse(text).unwrap().pairs, want, "{text}");
        }
    }

    #[test]
    fn bad_distributions_say_why() {
        for (text, why) in [
            ("256,128:60;512,256:30", "add up to 90"),
            ("256,128", "not of the form ISL,OSL:PROB"),
            ("256:100", "not of the form ISL,OSL"),
            ("abc,128:100", "'abc' is not a number"),
            ("0,128:100", "ISL 0 is not allowed"),
            ("256,128:0;512,256:100", "probability 0 is not allowed"),
            ("[(256,128):100", "must end with ']'"),
            ("{\"pairs\": 3}", "not valid JSON"),
            ("", "no pairs"),
        ] {
            let err = SeqDist::parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn pairs_are_drawn_by_their_shares() {
        let d = SeqDist::parse("20,5:25;60,9:75").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws: Vec<(u64, u64)> = (0..4000).map(|_| d.sample(&mut rng)).collect();
        assert!(draws.iter().all(|&d| d == (20, 5) || d == (60, 9)));
        let short = draws.iter().filter(|&&d| d == (20, 5)).count() as f64 / 4000.0;
        assert!((short - 0.25).abs() < 0.03, "{short}");
        let d = SeqDist::parse("100|10,50|1:100").unwrap();
        let isl: Vec<f64> = (0..4000).map(|_| d.sample(&mut rng).0 as f64).collect();
        let mean = isl.iter().sum::<f64>() / isl.len() as f64;
        assert!((mean - 100.0).abs() < 1.0, "{mean}");
    }
}
