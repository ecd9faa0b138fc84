//! `--model-selection-strategy`: which of several models each request names. Models are
//! chosen turn by turn while the bodies are built, in dataset order, so a body and its
//! `inputs.json` payload always name the same model.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

/// How each request's model is picked from several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelSelection {
    /// Models in turn: turn i names model i mod N.
    #[default]
    RoundRobin,
    /// A uniform draw per turn, from the run's seed.
    Random,
}

impl ModelSelection {
    /// AIPerf's spelling of the strategy.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelSelection::RoundRobin => "round_robin",
            ModelSelection::Random => "random",
        }
    }
}

/// Hands out the model of each turn.
pub struct ModelPicker {
    names: Vec<String>,
    strategy: ModelSelection,
    turn: u64,
    rng: ChaCha8Rng,
}

impl ModelPicker {
    pub fn new(names: Vec<String>, strategy: ModelSelection, seed: u64) -> Self {
        ModelPicker {
            names,
            strategy,
            turn: 0,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x30de_15e1_ec70_0000),
        }
    }

    /// The next turn's model; `None` with a single model (the body options name it).
    pub fn next_model(&mut self) -> Option<&str> {
        if self.names.len() < 2 {
            return None;
        }
        let i = match self.strategy {
            ModelSelection::RoundRobin => (self.turn % self.names.len() as u64) as usize,
            ModelSelection::Random => self.rng.random_range(0..self.names.len()),
        };
        self.turn += 1;
        Some(&self.names[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into(), "c".into()]
    }

    #[test]
    fn round_robin_takes_models_in_turn() {
        let mut p = ModelPicker::new(names(), ModelSelection::RoundRobin, 1);
        let got: Vec<String> = (0..5).map(|_| p.next_model().unwrap().into()).collect();
        assert_eq!(got, ["a", "b", "c", "a", "b"]);
        let mut one = ModelPicker::new(vec!["a".into()], ModelSelection::Random, 1);
        assert_eq!(one.next_model(), None);
    }

    #[test]
    fn random_draws_every_model_and_repeats_per_seed() {
        let draw = |seed| {
            let mut p = ModelPicker::new(names(), ModelSelection::Random, seed);
            (0..300)
                .map(|_| p.next_model().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        for m in ["a", "b", "c"] {
            let n = a.iter().filter(|x| *x == m).count();
            assert!((60..140).contains(&n), "{m} drawn {n} of 300");
        }
    }
}
