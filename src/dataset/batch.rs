//! `--prompt-batch-size`: several synthetic prompts in one request. Each group of `size`
//! consecutive single-turn entries becomes one entry whose texts are theirs, in order, and
//! whose input length is their sum.

use super::{Conversation, Dataset};

/// Groups the conversations `size` at a time (a last, short group is dropped, so every
/// request has `size` texts).
pub fn group(dataset: Dataset, size: usize) -> Dataset {
    let mut conversations = Vec::with_capacity(dataset.conversations.len() / size.max(1));
    let mut turns = dataset.conversations.into_iter().flat_map(|c| c.turns);
    loop {
        let group: Vec<_> = turns.by_ref().take(size).collect();
        if group.len() < size || group.is_empty() {
            break;
        }
        let mut entries = group.into_iter();
        let mut merged = entries.next().expect("a full group");
        for e in entries {
            merged.input_tokens += e.input_tokens;
            merged.extra_texts.push(e.text);
            merged.extra_texts.extend(e.extra_texts);
        }
        conversations.push(Conversation {
            session_id: None,
            system: None,
            turns: vec![merged],
        });
    }
    Dataset {
        conversations,
        sampling: dataset.sampling,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DatasetSampling, Entry};
    use super::*;

    #[test]
    fn groups_of_texts_with_summed_lengths() {
        let one = |t: &str| Conversation {
            session_id: None,
            system: None,
            turns: vec![Entry::synthetic(t.into(), 2, Vec::new(), Some(5))],
        };
        let d = Dataset {
            conversations: ["a", "b", "c", "d", "e"].into_iter().map(one).collect(),
            sampling: DatasetSampling::Sequential,
        };
        let g = group(d, 2);
        assert_eq!(g.conversations.len(), 2);
        let e = &g.conversations[1].turns[0];
        assert_eq!(
            (e.text.as_str(), e.extra_texts.clone()),
            ("c", vec!["d".to_string()])
        );
        assert_eq!(e.input_tokens, 4);
        assert_eq!(e.max_output_tokens, Some(5));
    }
}
