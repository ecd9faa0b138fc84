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

/// A length of time for a message: "45 s", "2.8 hours", "11.6 days", "317 years".
pub fn about(secs: f64) -> String {
    const DAY: f64 = 86_400.0;
    match secs {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7_200.0 => format!("{:.0} minutes", s / 60.0),
        s if s < 2.0 * DAY => format!("{:.1} hours", s / 3_600.0),
        s if s < 365.0 * DAY => format!("{:.1} days", s / DAY),
        s => format!("{:.0} years", s / (365.0 * DAY)),
    }
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
        assert_eq!(crate::cli::whole_number("1e6"), Ok(1_000_000));
        assert_eq!(crate::cli::whole_number("12"), Ok(12));
        assert!(crate::cli::whole_number("1.5").is_err());
        assert!(crate::cli::whole_number("-1").is_err());
        assert!(crate::cli::whole_number("abc").is_err());
        let e = count("--n", 11, 10, "requests", "")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--n: 11 is not allowed; give 1 or more requests, at most 10"
        );
    }
}
