//! Upper bounds on command-line values, so that a value too large to represent or to
//! allocate is refused with a message instead of a panic or an abort.

use std::time::Duration;

use crate::config::ConfigError;

/// The longest duration any flag accepts: one year. Far beyond any benchmark, and far
/// below what `std::time::Duration` and the timers can hold.
pub const MAX_SECONDS: f64 = 365.0 * 86_400.0;

/// Whether a duration flag accepts 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    Allowed,
    Refused,
}

fn range_text(zero: Zero) -> String {
    let low = match zero {
        Zero::Allowed => ">= 0",
        Zero::Refused => "> 0",
    };
    format!("{low} and at most {MAX_SECONDS:.0} (one year)")
}

/// Seconds from a flag, checked to be finite, in range and representable.
pub fn seconds(flag: &str, v: f64, zero: Zero) -> Result<Duration, ConfigError> {
    let low_ok = v > 0.0 || (zero == Zero::Allowed && v == 0.0);
    if !(v.is_finite() && low_ok && v <= MAX_SECONDS) {
        return Err(ConfigError(format!(
            "{flag}: {v} is not allowed; give a number of seconds {}",
            range_text(zero)
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

/// A grace period in seconds, where `inf` means "wait for all" (`None`).
pub fn grace_seconds(flag: &str, v: f64) -> Result<Option<Duration>, ConfigError> {
    if v == f64::INFINITY {
        return Ok(None);
    }
    seconds(flag, v, Zero::Allowed)
        .map_err(|_| {
            ConfigError(format!(
                "{flag}: {v} is not allowed; give a number of seconds {}, or inf to wait for all",
                range_text(Zero::Allowed)
            ))
        })
        .map(Some)
}

/// Milliseconds from a flag (think times), with the same one-year bound.
pub fn millis(flag: &str, v: f64) -> Result<f64, ConfigError> {
    if !(v.is_finite() && (0.0..=MAX_SECONDS * 1e3).contains(&v)) {
        return Err(ConfigError(format!(
            "{flag}: {v} is not allowed; give milliseconds >= 0 and at most {:.0} (one year)",
            MAX_SECONDS * 1e3
        )));
    }
    Ok(v)
}

/// Most requests (or conversations) one phase may plan: each planned send holds its id and
/// order entry (about 100 bytes) and each finished one its metrics, so 10 million stay
/// around a gigabyte or two. Longer runs are what `--benchmark-duration` is for.
pub const MAX_REQUESTS: u64 = 10_000_000;

/// Most requests in flight: each holds a connection (a file descriptor) and a task.
pub const MAX_CONCURRENCY: u64 = 100_000;

/// Most pixels in one synthetic image (8192 x 8192): a raw frame is 3 bytes a pixel, and
/// several are encoded at once.
pub const MAX_IMAGE_PIXELS: u64 = 1 << 26;

/// A clap value parser for counts: a whole number, also in float notation (`1e6`), so that
/// `--request-count 1e12` reaches the range check instead of failing as "invalid digit".
pub fn whole_number(s: &str) -> Result<u64, String> {
    if let Ok(n) = s.trim().parse::<u64>() {
        return Ok(n);
    }
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64 => {
            Ok(f as u64)
        }
        _ => Err("give a whole number >= 0, e.g. 100 or 1e6".into()),
    }
}

/// A count flag from 1 to `max` (`what` names the unit, `hint` may add a way out).
pub fn count(flag: &str, v: u64, max: u64, what: &str, hint: &str) -> Result<(), ConfigError> {
    if v == 0 || v > max {
        return Err(ConfigError(format!(
            "{flag}: {v} is not allowed; give 1 or more {what}, at most {max}{hint}"
        )));
    }
    Ok(())
}

/// Bytes of memory the machine has available now (`MemAvailable` on Linux); `None` where
/// it cannot be read, and then only the fixed bounds apply.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `n` bytes as "12.3 GiB".
pub fn gib(n: f64) -> String {
    format!("{:.1} GiB", n / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_bounded_and_named() {
        assert_eq!(
            seconds("--x", 1.5, Zero::Refused).unwrap(),
            Duration::from_millis(1500)
        );
        assert!(seconds("--x", 0.0, Zero::Refused).is_err());
        assert!(seconds("--x", 0.0, Zero::Allowed).is_ok());
        let e = seconds("--x", 1e20, Zero::Refused).unwrap_err().to_string();
        assert_eq!(
            e,
            "--x: 100000000000000000000 is not allowed; give a number of seconds > 0 and at most 31536000 (one year)"
        );
        assert_eq!(grace_seconds("--g", f64::INFINITY).unwrap(), None);
        let e = grace_seconds("--g", 1e300).unwrap_err().to_string();
        assert!(e.contains("--g") && e.contains("or inf"), "{e}");
        assert!(millis("--m", f64::NAN).is_err());
        assert!(millis("--m", 1e15).is_err());
    }

    #[test]
    fn counts_take_float_notation_and_a_range() {
        assert_eq!(whole_number("1e6"), Ok(1_000_000));
        assert_eq!(whole_number("12"), Ok(12));
        assert!(whole_number("1.5").is_err());
        assert!(whole_number("-1").is_err());
        assert!(whole_number("abc").is_err());
        let e = count("--n", 11, 10, "requests", "")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--n: 11 is not allowed; give 1 or more requests, at most 10"
        );
    }
}
