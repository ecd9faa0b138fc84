//! An external merge sort: items are gathered up to a memory limit, each full buffer is
//! sorted and written to a spill as a run, and reading merges the runs (a heap of one
//! head per run). Fewer items than the limit are sorted in memory and never written.
//!
//! Items must be totally ordered with ties only between identical items (a stable order
//! is made total by adding the item's position to its key), so the order read back is
//! the one sorting all of them in memory would give, whatever the runs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::{Log, Reader, Spill, get_varint, put_varint};

/// What a sort holds in memory while it gathers a run (the merge adds a chunk per run).
pub const RUN_BYTES: usize = 2 << 20;

/// An item of a sorted run, encoded knowing the item before it in the run (`State`).
pub trait Item: Ord + Sized {
    /// What encoding carries from one item to the next (the previous key, for deltas).
    type State: Default;
    fn encode(&self, state: &mut Self::State, out: &mut Vec<u8>);
    /// The item at the start of `bytes` and its encoded length.
    fn decode(state: &mut Self::State, bytes: &[u8]) -> (Self, usize);
    /// Bytes the item owns besides its own size (a payload).
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// Sorted keys are stored as varint deltas.
impl Item for u64 {
    type State = u64;
    fn encode(&self, prev: &mut u64, out: &mut Vec<u8>) {
        put_varint(out, u128::from(self - *prev));
        *prev = *self;
    }
    fn decode(prev: &mut u64, bytes: &[u8]) -> (u64, usize) {
        let (delta, used) = get_varint(bytes);
        *prev += delta as u64;
        (*prev, used)
    }
}

impl Item for u128 {
    type State = u128;
    fn encode(&self, prev: &mut u128, out: &mut Vec<u8>) {
        put_varint(out, self - *prev);
        *prev = *self;
    }
    fn decode(prev: &mut u128, bytes: &[u8]) -> (u128, usize) {
        let (delta, used) = get_varint(bytes);
        *prev += delta;
        (*prev, used)
    }
}

/// A key with bytes riding along (ordered by the key, then the bytes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Keyed {
    pub key: u128,
    pub bytes: Box<[u8]>,
}

impl Item for Keyed {
    type State = u128;
    fn encode(&self, prev: &mut u128, out: &mut Vec<u8>) {
        put_varint(out, self.key - *prev);
        put_varint(out, self.bytes.len() as u128);
        out.extend_from_slice(&self.bytes);
        *prev = self.key;
    }
    fn decode(prev: &mut u128, bytes: &[u8]) -> (Keyed, usize) {
        let (delta, a) = get_varint(bytes);
        let (len, b) = get_varint(&bytes[a..]);
        let start = a + b;
        let end = start + len as usize;
        *prev += delta;
        let item = Keyed {
            key: *prev,
            bytes: bytes[start..end].into(),
        };
        (item, end)
    }
    fn heap_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// A key with a 64-bit value riding along (ordered by the key, then the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyValue {
    pub key: u128,
    pub value: u64,
}

impl Item for KeyValue {
    type State = u128;
    fn encode(&self, prev: &mut u128, out: &mut Vec<u8>) {
        put_varint(out, self.key - *prev);
        out.extend_from_slice(&self.value.to_le_bytes());
        *prev = self.key;
    }
    fn decode(prev: &mut u128, bytes: &[u8]) -> (KeyValue, usize) {
        let (delta, used) = get_varint(bytes);
        *prev += delta;
        let value = u64::from_le_bytes(bytes[used..used + 8].try_into().expect("8 bytes"));
        (KeyValue { key: *prev, value }, used + 8)
    }
}

/// Gathers items and sorts them within `limit` bytes of memory.
pub struct Sorter<T: Item> {
    spill: Arc<Spill>,
    buf: Vec<T>,
    held: usize,
    limit: usize,
    runs: Vec<Log>,
}

impl<T: Item> Sorter<T> {
    pub fn new(spill: &Arc<Spill>, limit: usize) -> Self {
        Sorter {
            spill: spill.clone(),
            buf: Vec::new(),
            held: 0,
            limit,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, item: T) {
        self.held += std::mem::size_of::<T>() + item.heap_bytes();
        self.buf.push(item);
        if self.held >= self.limit {
            self.write_run();
        }
    }

    fn write_run(&mut self) {
        self.buf.sort_unstable();
        let mut log = Log::new(&self.spill);
        let mut state = T::State::default();
        for item in self.buf.drain(..) {
            item.encode(&mut state, log.tail());
            log.end_item();
        }
        log.close();
        self.runs.push(log);
        self.held = 0;
    }

    /// The items, sorted: in memory when they fitted, else as runs to merge.
    pub fn finish(mut self) -> Sorted<T> {
        if self.runs.is_empty() {
            self.buf.sort_unstable();
            return Sorted {
                memory: self.buf,
                runs: Vec::new(),
            };
        }
        if !self.buf.is_empty() {
            self.write_run();
        }
        Sorted {
            memory: Vec::new(),
            runs: self.runs,
        }
    }
}

/// Sorted items, read in order as often as needed.
pub struct Sorted<T> {
    memory: Vec<T>,
    runs: Vec<Log>,
}

impl<T: Item> Sorted<T> {
    /// Every item, in order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_
    where
        T: Clone,
    {
        let mut memory = self.memory.iter();
        let mut merge = Merge::new(&self.runs);
        std::iter::from_fn(move || match memory.next() {
            Some(item) => Some(item.clone()),
            None => merge.next(),
        })
    }

    /// Whether any run was written (for tests that must exercise the merge).
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
}

/// One run being read: its reader and the state of its encoding.
struct RunReader<'a, T: Item> {
    reader: Reader<'a>,
    state: T::State,
}

impl<T: Item> RunReader<'_, T> {
    fn next(&mut self) -> Option<T> {
        let bytes = self.reader.rest()?;
        let (item, used) = T::decode(&mut self.state, bytes);
        self.reader.advance(used);
        Some(item)
    }
}

/// The runs' items in order: the heap holds each run's next item.
struct Merge<'a, T: Item> {
    runs: Vec<RunReader<'a, T>>,
    heap: BinaryHeap<Reverse<(T, usize)>>,
}

impl<'a, T: Item> Merge<'a, T> {
    fn new(logs: &'a [Log]) -> Self {
        let mut runs: Vec<RunReader<T>> = logs
            .iter()
            .map(|log| RunReader {
                reader: log.reader(),
                state: T::State::default(),
            })
            .collect();
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (i, run) in runs.iter_mut().enumerate() {
            if let Some(item) = run.next() {
                heap.push(Reverse((item, i)));
            }
        }
        Merge { runs, heap }
    }
}

impl<T: Item> Iterator for Merge<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        // A single run needs no heap.
        if self.runs.len() == 1 {
            if let Some(Reverse((item, _))) = self.heap.pop() {
                return Some(item);
            }
            return self.runs[0].next();
        }
        let mut top = self.heap.peek_mut()?;
        let run = top.0.1;
        match self.runs[run].next() {
            Some(next) => {
                let Reverse((item, _)) = std::mem::replace(&mut *top, Reverse((next, run)));
                Some(item)
            }
            None => {
                drop(top);
                self.heap.pop().map(|Reverse((item, _))| item)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn merged_runs_are_the_sort_in_memory(
            keys in proptest::collection::vec(prop_oneof![0u64..50, any::<u64>()], 0..3000),
            limit in prop_oneof![Just(16usize), Just(800), Just(1 << 20)],
        ) {
            let spill = Spill::new();
            let mut sorter = Sorter::new(&spill, limit);
            for &k in &keys {
                sorter.push(k);
            }
            let sorted = sorter.finish();
            let mut want = keys.clone();
            want.sort_unstable();
            let got: Vec<u64> = sorted.iter().collect();
            prop_assert_eq!(&got, &want);
            // Read twice, the same.
            prop_assert_eq!(sorted.iter().collect::<Vec<u64>>(), want);
        }

        #[test]
        fn keyed_items_keep_their_bytes(
            items in proptest::collection::vec((0u128..40, proptest::collection::vec(any::<u8>(), 0..40)), 0..600),
        ) {
            let spill = Spill::new();
            let mut sorter = Sorter::new(&spill, 2000);
            let mut want: Vec<Keyed> = items
                .into_iter()
                .enumerate()
                .map(|(i, (k, b))| Keyed { key: k << 32 | i as u128, bytes: b.into() })
                .collect();
            for item in &want {
                sorter.push(item.clone());
            }
            let sorted = sorter.finish();
            want.sort();
            prop_assert_eq!(sorted.iter().collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn many_keys_go_through_runs_on_disk() {
        let spill = Spill::new();
        let mut sorter = Sorter::new(&spill, 4096);
        for i in 0..10_000u128 {
            sorter.push((i * 7919) % 10_007);
        }
        let sorted = sorter.finish();
        assert!(sorted.runs() > 10);
        assert!(spill.written() > 0);
        let got: Vec<u128> = sorted.iter().collect();
        assert!(got.is_sorted());
        assert_eq!(got.len(), 10_000);
    }
}
