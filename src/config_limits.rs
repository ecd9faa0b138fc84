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
    if !(v.is_finite() && v >= 0.0 && v <= MAX_SECONDS * 1e3) {
        return Err(ConfigError(format!(
            "{flag}: {v} is not allowed; give milliseconds >= 0 and at most {:.0} (one year)",
            MAX_SECONDS * 1e3
        )));
    }
    Ok(v)
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
}
