//! Windows of recent values and the test for a change of link, shared by the
//! interpolation buffer's delay policy and the client's adaptive lead: both size a delay
//! from the tail of a window and both must notice when the link under it changed.

pub(crate) mod shift;

use std::collections::VecDeque;

/// The last `capacity` values in arrival order, mirrored by a sorted copy so order
/// statistics cost a binary search and each update a shift, never a sort.
#[derive(Debug, Clone)]
pub(crate) struct SortedWindow<T> {
    capacity: usize,
    arrived: VecDeque<T>,
    sorted: Vec<T>,
}

impl<T: Copy + PartialOrd> SortedWindow<T> {
    /// An empty window of `capacity` (at least 1), with room for `prealloc` values up
    /// front: a window much longer than it usually fills need not cost its memory.
    pub(crate) fn new(capacity: usize, prealloc: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            arrived: VecDeque::with_capacity(prealloc),
            sorted: Vec::with_capacity(prealloc),
        }
    }

    /// Adds `value`, forgetting the oldest when full.
    pub(crate) fn push(&mut self, value: T) {
        if self.arrived.len() >= self.capacity {
            if let Some(old) = self.arrived.pop_front() {
                let i = self.sorted.partition_point(|x| *x < old);
                if i < self.sorted.len() {
                    self.sorted.remove(i);
                }
            }
        }
        self.arrived.push_back(value);
        let i = self.sorted.partition_point(|x| *x < value);
        self.sorted.insert(i, value);
    }

    /// The values, smallest first.
    pub(crate) fn sorted(&self) -> &[T] {
        &self.sorted
    }

    /// Values held.
    pub(crate) fn len(&self) -> usize {
        self.arrived.len()
    }

    /// Values held when full.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The last `n` values, in arrival order.
    pub(crate) fn recent(&self, n: usize) -> impl Iterator<Item = T> + Clone + '_ {
        last(&self.arrived, n).copied()
    }

    /// A window of the same capacity holding only the last `n` values.
    pub(crate) fn tail(&self, n: usize) -> Self {
        let mut tail = Self {
            capacity: self.capacity,
            arrived: VecDeque::with_capacity(self.arrived.capacity()),
            sorted: Vec::with_capacity(self.sorted.capacity()),
        };
        for v in self.recent(n) {
            tail.push(v);
        }
        tail
    }

    /// Forgets every value.
    pub(crate) fn clear(&mut self) {
        self.arrived.clear();
        self.sorted.clear();
    }
}

/// The last `n` entries of `q`, oldest first.
pub(crate) fn last<T>(q: &VecDeque<T>, n: usize) -> impl Iterator<Item = &T> + Clone {
    q.iter().skip(q.len().saturating_sub(n))
}

/// Appends `value` to `q`, forgetting the oldest entry once `q` holds `cap`.
pub(crate) fn push_bounded<T>(q: &mut VecDeque<T>, value: T, cap: usize) {
    if q.len() >= cap {
        q.pop_front();
    }
    q.push_back(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sorted_window_keeps_the_last_values_in_order() {
        let mut w = SortedWindow::new(3, 3);
        for v in [5, 1, 4, 2] {
            w.push(v);
        }
        assert_eq!(w.sorted(), &[1, 2, 4]);
        assert_eq!(w.recent(2).collect::<Vec<_>>(), vec![4, 2]);
        let tail = w.tail(2);
        assert_eq!((tail.sorted(), tail.capacity()), (&[2, 4][..], 3));
        w.clear();
        assert_eq!(w.len(), 0);
    }
}
