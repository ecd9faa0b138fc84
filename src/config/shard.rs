//! `--shard-index`, `--shard-count` and `--start-at`: which part of the plan this load
//! generator sends, and when it starts.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::cli::ProfileArgs;
use crate::cli::shard::{COUNT_ENV, INDEX_ENV};
use crate::load::{LoadOptions, Shard};

use super::{ConfigError, config_error};

/// How far in the past `--start-at` may be (clocks of different machines disagree a
/// little, and a pod may start a moment late).
pub const START_AT_PAST_SLACK_S: f64 = 5.0;

/// This run's part of a sharded plan and its shared start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShardOptions {
    pub shard: Option<Shard>,
    /// `--start-at` as ns since the Unix epoch.
    pub start_at_wall_ns: Option<u64>,
}

/// Checks the shard flags against the load mode: every mode must split into exact parts.
pub(super) fn check_shard(
    a: &ProfileArgs,
    load: &LoadOptions,
    concurrency: u64,
) -> Result<ShardOptions, ConfigError> {
    let s = &a.shard;
    let start_at_wall_ns = s.start_at.as_deref().map(parse_start_at).transpose()?;
    let shard = match (s.shard_index, s.shard_count) {
        (_, Some(0)) => {
            return Err(config_error(format!(
                "--shard-count (or ${COUNT_ENV}): 0 is not allowed; give 1 or more load generators"
            )));
        }
        (None, Some(n)) => {
            return Err(config_error(format!(
                "--shard-count {n} needs --shard-index (or ${INDEX_ENV}): which of the {n} shards is this one?"
            )));
        }
        (Some(i), Some(n)) if i >= n => {
            return Err(config_error(format!(
                "--shard-index (or ${INDEX_ENV}) {i} is not below --shard-count {n}; give an index from 0 to {}",
                n - 1
            )));
        }
        (Some(i), Some(n)) => Some(Shard { index: i, count: n }),
        // An index alone from the environment (a Job that is not sharded): no shard.
        (Some(i), None) if a.typed("shard_index") => {
            return Err(config_error(format!(
                "--shard-index {i} needs --shard-count (or ${COUNT_ENV}): how many shards share the plan?"
            )));
        }
        (_, None) => None,
    };
    if let Some(shard) = shard {
        check_modes_split(a, load, concurrency, shard)?;
    }
    Ok(ShardOptions {
        shard,
        start_at_wall_ns,
    })
}

/// Refuses modes whose parts would not add up to the single run.
fn check_modes_split(
    a: &ProfileArgs,
    load: &LoadOptions,
    concurrency: u64,
    shard: Shard,
) -> Result<(), ConfigError> {
    let n = shard.count;
    if load.user_centric.is_some() {
        return Err(config_error(
            "--user-centric-rate cannot be split over --shard-count: each user's turns keep one schedule; run it from one load generator",
        ));
    }
    let closed_loop = load.rate.is_none() && !load.fixed_schedule;
    if (closed_loop || load.concurrency_given) && concurrency < n {
        return Err(config_error(format!(
            "--concurrency {concurrency} is less than --shard-count {n}: each shard needs at least one request in flight; raise --concurrency or use fewer shards"
        )));
    }
    if let Some(p) = load.prefill_concurrency
        && p < n
    {
        return Err(config_error(format!(
            "--prefill-concurrency {p} is less than --shard-count {n}: each shard needs at least one prefill slot"
        )));
    }
    // The seed is 42 unless --no-set-consistent-seed left it to chance.
    if a.random_seed.is_none() {
        return Err(config_error(
            "--no-set-consistent-seed with --shard-count: every shard must draw the same plan; give --random-seed",
        ));
    }
    Ok(())
}

/// `--start-at`: RFC 3339 or Unix epoch seconds; refused when well in the past.
fn parse_start_at(text: &str) -> Result<u64, ConfigError> {
    let wall_ns = parse_wall_time("--start-at", text).map_err(config_error)?;
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let past_s = (now_ns as f64 - wall_ns as f64) / 1e9;
    if past_s > START_AT_PAST_SLACK_S {
        return Err(config_error(format!(
            "--start-at {text} was {past_s:.1} s ago; give a time in the future (shards wait for it), e.g. $(( $(date +%s) + 30 ))"
        )));
    }
    Ok(wall_ns)
}

/// A time given as RFC 3339 or Unix epoch seconds (fractions allowed), in ns since 1970.
pub fn parse_wall_time(flag: &str, text: &str) -> Result<u64, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Ok((secs * 1e9) as u64),
        Ok(_) => Err(format!("{flag} {text}: give a time after 1970")),
        Err(_) => {
            let ts: jiff::Timestamp = text.trim().parse().map_err(|e| {
                format!(
                    "{flag} {text}: not a time ({e}); give RFC 3339 such as 2026-12-03T18:00:00Z or Unix epoch seconds"
                )
            })?;
            u64::try_from(ts.as_nanosecond())
                .map_err(|_| format!("{flag} {text}: give a time after 1970"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_at_takes_rfc3339_and_epoch_seconds() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let soon = now.as_secs_f64() + 10.5;
        let ns = parse_start_at(&format!("{soon}")).unwrap();
        assert!((ns as f64 / 1e9 - soon).abs() < 1e-6);
        let rfc = jiff::Timestamp::from_second(now.as_secs() as i64 + 60).unwrap();
        let ns = parse_start_at(&rfc.to_string()).unwrap();
        assert_eq!(ns, (now.as_secs() + 60) * 1_000_000_000);
        let e = parse_start_at("2020-01-01T00:00:00Z")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--start-at") && e.contains("ago"), "{e}");
        let e = parse_start_at("tomorrow").unwrap_err().to_string();
        assert!(e.contains("RFC 3339"), "{e}");
    }
}
