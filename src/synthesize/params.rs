//! The agentic-code generator's settings (AIPerf's `SessionDistributionConfig`): read from
//! JSON (a config or an earlier run's manifest.json), checked, with each lognormal's mu and
//! sigma derived from its mean and median.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A lognormal given by its real-space mean and median (mu = ln median, sigma =
/// sqrt(2 ln(mean / median))), optionally bounded (values outside are drawn again).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lognormal {
    #[serde(default)]
    pub mu: Option<f64>,
    #[serde(default)]
    pub sigma: Option<f64>,
    pub mean: f64,
    pub median: f64,
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    /// New tokens per turn only: a multiplier on the target, for the truncation at the
    /// context window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<f64>,
}

impl Lognormal {
    fn new(mean: f64, median: f64) -> Self {
        Lognormal {
            mu: None,
            sigma: None,
            mean,
            median,
            min: None,
            max: None,
            bias: None,
        }
    }

    /// Checks it and derives mu and sigma; `at` names it in messages.
    fn resolve(&mut self, at: &str) -> Result<(), String> {
        if !(self.mean > 0.0 && self.median > 0.0) {
            return Err(format!("{at}: mean and median must be > 0"));
        }
        if self.mean < self.median {
            return Err(format!(
                "{at}: mean ({}) must be >= median ({}) for a lognormal",
                self.mean, self.median
            ));
        }
        for (name, v) in [("min", self.min), ("max", self.max), ("bias", self.bias)] {
            if v.is_some_and(|v| !(v > 0.0 && v.is_finite())) {
                return Err(format!("{at}.{name}: must be > 0"));
            }
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max)
            && lo > hi
        {
            return Err(format!("{at}: min ({lo}) must be <= max ({hi})"));
        }
        match (self.mu, self.sigma) {
            (None, None) => {
                let ratio = self.mean / self.median;
                self.mu = Some(self.median.ln());
                self.sigma = Some(if ratio > 1.0 {
                    (2.0 * ratio.ln()).sqrt()
                } else {
                    0.0
                });
            }
            (Some(mu), Some(sigma)) if mu.is_finite() && sigma.is_finite() && sigma >= 0.0 => {}
            (Some(_), Some(_)) => {
                return Err(format!("{at}: mu and sigma must be finite, sigma >= 0"));
            }
            _ => return Err(format!("{at}: give mu and sigma together, or neither")),
        }
        Ok(())
    }

    pub fn mu(&self) -> f64 {
        self.mu.expect("resolved")
    }

    pub fn sigma(&self) -> f64 {
        self.sigma.expect("resolved")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixtureDelay {
    #[serde(default = "agentic_fraction")]
    pub agentic_fraction: f64,
    #[serde(default = "agentic_delay")]
    pub agentic_delay: Lognormal,
    #[serde(default = "human_delay")]
    pub human_delay: Lognormal,
    #[serde(default)]
    pub max: Option<f64>,
}

fn agentic_fraction() -> f64 {
    0.7
}
fn agentic_delay() -> Lognormal {
    Lognormal::new(2_500.0, 1_800.0)
}
fn human_delay() -> Lognormal {
    Lognormal::new(40_000.0, 25_000.0)
}

impl Default for MixtureDelay {
    fn default() -> Self {
        MixtureDelay {
            agentic_fraction: agentic_fraction(),
            agentic_delay: agentic_delay(),
            human_delay: human_delay(),
            max: None,
        }
    }
}

/// P(reset) = base * (1 + (scaling - 1) * input_length / max_prompt_tokens).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reset {
    #[serde(default = "base_probability")]
    pub base_probability: f64,
    #[serde(default = "context_scaling")]
    pub context_scaling: f64,
}

fn base_probability() -> f64 {
    0.02
}
fn context_scaling() -> f64 {
    2.0
}

/// Turns per session drawn from a bounded lognormal instead of ended by resets.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turns {
    pub mean: u64,
    pub median: u64,
    pub min: u64,
    pub max: u64,
    #[serde(default)]
    pub allow_truncation: bool,
    #[serde(default)]
    pub max_session_attempts: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Groups {
    #[serde(default = "num_groups")]
    pub num_groups: u64,
    #[serde(default = "zipf_alpha")]
    pub zipf_alpha: f64,
}

fn num_groups() -> u64 {
    50
}
fn zipf_alpha() -> f64 {
    1.2
}

impl Default for Groups {
    fn default() -> Self {
        Groups {
            num_groups: num_groups(),
            zipf_alpha: zipf_alpha(),
        }
    }
}

/// The prefix layers: L1 shared by all, L1.5 by a group, L2 by one session.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cache {
    #[serde(default = "layer1_tokens")]
    pub layer1_tokens: u64,
    #[serde(default = "layer1_5_tokens")]
    pub layer1_5_tokens: u64,
    #[serde(default = "layer2")]
    pub layer2: Lognormal,
    #[serde(default)]
    pub layer1_5_groups: Groups,
}

fn layer1_tokens() -> u64 {
    32_000
}
fn layer1_5_tokens() -> u64 {
    20_000
}
fn layer2() -> Lognormal {
    Lognormal::new(10_000.0, 5_000.0)
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            layer1_tokens: layer1_tokens(),
            layer1_5_tokens: layer1_5_tokens(),
            layer2: layer2(),
            layer1_5_groups: Groups::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default = "new_tokens")]
    pub new_tokens_per_turn: Lognormal,
    #[serde(default = "generation_length")]
    pub generation_length: Lognormal,
    #[serde(default)]
    pub inter_turn_delay: MixtureDelay,
    #[serde(default = "reset")]
    pub reset: Option<Reset>,
    #[serde(default)]
    pub turns: Option<Turns>,
    #[serde(default = "max_prompt_tokens")]
    pub max_prompt_tokens: u64,
    #[serde(default = "block_size")]
    pub block_size: u64,
    #[serde(default)]
    pub cache: Cache,
    #[serde(default)]
    pub restart_initial_probability: f64,
    #[serde(default = "restart_turn_range")]
    pub restart_turn_range: [u64; 2],
}

fn new_tokens() -> Lognormal {
    let mut l = Lognormal::new(3_500.0, 1_800.0);
    l.bias = Some(1.0);
    l
}
fn generation_length() -> Lognormal {
    Lognormal::new(500.0, 300.0)
}
fn reset() -> Option<Reset> {
    Some(Reset {
        base_probability: base_probability(),
        context_scaling: context_scaling(),
    })
}
fn max_prompt_tokens() -> u64 {
    200_000
}
fn block_size() -> u64 {
    512
}
fn restart_turn_range() -> [u64; 2] {
    [5, 15]
}

/// The smallest output drawn (or generation_length.max when lower).
pub const OUTPUT_MIN: u64 = 30;

impl Params {
    /// The generator's defaults.
    pub fn defaults() -> Result<Params, String> {
        Params::from_value(Value::Object(Default::default()))
    }

    /// Reads settings (or a manifest's `generation_params`) and checks them.
    pub fn from_value(mut v: Value) -> Result<Params, String> {
        let Some(obj) = v.as_object_mut() else {
            return Err("the settings must be a JSON object".into());
        };
        if let Some(inner) = obj.remove("generation_params") {
            return Params::from_value(inner);
        }
        // Spellings AIPerf still reads: a dropped key, an old name.
        obj.remove("system_prompt_tokens");
        if let Some(r) = obj.remove("restart_fraction") {
            if obj
                .get("restart_initial_probability")
                .is_some_and(|p| *p != r)
            {
                return Err(
                    "restart_fraction cannot differ from restart_initial_probability".into(),
                );
            }
            obj.insert("restart_initial_probability".into(), r);
        }
        // Explicit turns replace resets unless both are written (then refused below).
        if obj.get("turns").is_some_and(|t| !t.is_null()) && !obj.contains_key("reset") {
            obj.insert("reset".into(), Value::Null);
        }
        let mut p: Params = serde_json::from_value(v).map_err(|e| e.to_string())?;
        p.check()?;
        Ok(p)
    }

    fn check(&mut self) -> Result<(), String> {
        if self.new_tokens_per_turn.bias.is_none() {
            self.new_tokens_per_turn.bias = Some(1.0);
        }
        self.new_tokens_per_turn.resolve("new_tokens_per_turn")?;
        self.generation_length.resolve("generation_length")?;
        let d = &mut self.inter_turn_delay;
        d.agentic_delay.resolve("inter_turn_delay.agentic_delay")?;
        d.human_delay.resolve("inter_turn_delay.human_delay")?;
        if !(0.0..=1.0).contains(&d.agentic_fraction) {
            return Err("inter_turn_delay.agentic_fraction: must be 0 to 1".into());
        }
        if d.max.is_some_and(|m| m.is_nan() || m < 0.0) {
            return Err("inter_turn_delay.max: must be >= 0".into());
        }
        self.cache.layer2.resolve("cache.layer2")?;
        if self.cache.layer1_5_groups.num_groups == 0 {
            return Err("cache.layer1_5_groups.num_groups: must be >= 1".into());
        }
        let alpha = self.cache.layer1_5_groups.zipf_alpha;
        if !alpha.is_finite() || alpha < 0.0 {
            return Err("cache.layer1_5_groups.zipf_alpha: must be >= 0".into());
        }
        if let Some(r) = &self.reset {
            if !(0.0..=1.0).contains(&r.base_probability) {
                return Err("reset.base_probability: must be 0 to 1".into());
            }
            if r.context_scaling.is_nan() || r.context_scaling < 1.0 {
                return Err("reset.context_scaling: must be >= 1".into());
            }
        }
        if self.max_prompt_tokens == 0 || self.block_size == 0 {
            return Err("max_prompt_tokens and block_size must be >= 1".into());
        }
        if !(0.0..=1.0).contains(&self.restart_initial_probability) {
            return Err("restart_initial_probability: must be 0 to 1".into());
        }
        let [lo, hi] = self.restart_turn_range;
        if lo < 1 || hi <= lo {
            return Err("restart_turn_range: give [min, max) with 1 <= min < max".into());
        }
        let Some(t) = &mut self.turns else {
            return Ok(());
        };
        if t.mean < t.median || t.min > t.median || t.mean > t.max || t.min > t.max || t.min == 0 {
            return Err(format!(
                "turns: need 1 <= min <= median <= mean <= max (min {}, median {}, mean {}, max {})",
                t.min, t.median, t.mean, t.max
            ));
        }
        match (t.allow_truncation, t.max_session_attempts) {
            (true, Some(_)) => {
                return Err(
                    "turns.max_session_attempts cannot be set when allow_truncation is true".into(),
                );
            }
            (false, None) => t.max_session_attempts = Some(100),
            (false, Some(0)) => return Err("turns.max_session_attempts: must be >= 1".into()),
            _ => {}
        }
        if self.reset.is_some() {
            return Err("turns cannot be combined with reset; give one".into());
        }
        if self.restart_initial_probability != 0.0 {
            return Err("turns cannot be combined with restart_initial_probability".into());
        }
        self.check_turns_fit()
    }

    /// Refuses explicit turn counts that cannot fit under the context window.
    fn check_turns_fit(&self) -> Result<(), String> {
        let Some(t) = &self.turns else { return Ok(()) };
        let min_l2 = self.cache.layer2.min.map_or(1, |m| m as u64);
        let min_new = self.new_tokens_per_turn.min.map_or(1, |m| m as u64);
        let min_out = self
            .generation_length
            .max
            .map_or(OUTPUT_MIN, |m| OUTPUT_MIN.min(m as u64));
        let mut input = self.cache.layer1_tokens + self.cache.layer1_5_tokens + min_l2;
        if input >= self.max_prompt_tokens {
            return Err(
                "turns: impossible: the smallest initial context reaches max_prompt_tokens".into(),
            );
        }
        if t.allow_truncation {
            return Ok(());
        }
        for _ in 1..t.min {
            input += min_out + min_new;
            if input >= self.max_prompt_tokens {
                return Err(
                    "turns: impossible: turns.min turns cannot fit under max_prompt_tokens".into(),
                );
            }
        }
        Ok(())
    }

    /// `--max-isl` and `--max-osl`, checked again with the rest.
    pub fn with_limits(
        mut self,
        max_isl: Option<u64>,
        max_osl: Option<u64>,
    ) -> Result<Params, String> {
        if let Some(isl) = max_isl {
            self.max_prompt_tokens = isl;
        }
        if let Some(osl) = max_osl {
            self.generation_length.max = Some(osl as f64);
        }
        self.check()?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mu_and_sigma_come_from_mean_and_median() {
        let p = Params::defaults().unwrap();
        let g = &p.generation_length;
        assert!((g.mu() - 300f64.ln()).abs() < 1e-12);
        assert!((g.sigma() - (2.0 * (500f64 / 300.0).ln()).sqrt()).abs() < 1e-12);
        assert_eq!(p.new_tokens_per_turn.bias, Some(1.0));
        assert!(p.reset.is_some() && p.turns.is_none());
    }

    #[test]
    fn turns_replace_resets_and_bad_settings_are_named() {
        let p = Params::from_value(json!({"turns": {"mean": 6, "median": 5, "min": 2, "max": 20}}))
            .unwrap();
        assert!(p.reset.is_none());
        assert_eq!(p.turns.unwrap().max_session_attempts, Some(100));
        let e =
            Params::from_value(json!({"generation_length": {"mean": 1, "median": 2}})).unwrap_err();
        assert!(
            e.starts_with("generation_length: mean (1) must be >= median (2)"),
            "{e}"
        );
        let e = Params::from_value(json!({"cache": {"layer3": 1}})).unwrap_err();
        assert!(e.contains("unknown field `layer3`"), "{e}");
        let manifest = json!({"seed": 1, "generation_params": {"max_prompt_tokens": 1000, "cache": {"layer1_tokens": 100, "layer1_5_tokens": 0}}});
        assert_eq!(
            Params::from_value(manifest).unwrap().max_prompt_tokens,
            1000
        );
    }
}
