//! CPU-time measurement for the lab's per-tick and per-reconcile figures.
//!
//! docs/metrics.md defines `server.tick_ms_*` and `prediction.reconcile_ms_*` as CPU time. Wall
//! time would also count the moments the OS gave the core to another process, and on a
//! shared 2-core machine those land straight in the p99. This reads the thread's CPU clock,
//! and falls back to wall time where the platform has no such clock.

use std::time::Instant;

/// A started measurement.
pub struct CpuTimer {
    thread: Option<cpu_time::ThreadTime>,
    /// Set instead of `thread` by [`CpuTimer::start_process`].
    process: Option<cpu_time::ProcessTime>,
    wall: Instant,
}

impl CpuTimer {
    /// Starts measuring the current thread.
    pub fn start() -> Self {
        Self {
            thread: cpu_time::ThreadTime::try_now().ok(),
            process: None,
            wall: Instant::now(),
        }
    }

    /// Starts measuring every thread of the process: for work the current thread hands
    /// to others and waits for (the server's encoding threads), in a process doing
    /// nothing else meanwhile.
    pub fn start_process() -> Self {
        Self {
            thread: None,
            process: cpu_time::ProcessTime::try_now().ok(),
            wall: Instant::now(),
        }
    }

    /// Starts measuring the current thread, or the process when `threads` (the work's
    /// threads, this one included) is more than one.
    pub fn start_for(threads: usize) -> Self {
        if threads > 1 {
            Self::start_process()
        } else {
            Self::start()
        }
    }

    /// Milliseconds of CPU time since the start, this thread's or the process's (wall
    /// time if unavailable).
    pub fn ms(&self) -> f64 {
        let elapsed = match (&self.thread, &self.process) {
            (Some(t), _) => t.try_elapsed().ok(),
            (None, Some(p)) => p.try_elapsed().ok(),
            (None, None) => None,
        }
        .unwrap_or_else(|| self.wall.elapsed());
        elapsed.as_secs_f64() * 1000.0
    }

    /// Milliseconds of wall time since the start.
    pub fn wall_ms(&self) -> f64 {
        self.wall.elapsed().as_secs_f64() * 1000.0
    }
}

/// A point in this thread's CPU time that can cross threads with the value holding it
/// (a [`CpuTimer`] cannot): only read it on the thread that took it.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    thread: Option<std::time::Duration>,
    wall: Instant,
}

impl CpuMark {
    /// This thread's CPU time now.
    pub fn now() -> Self {
        Self {
            thread: cpu_time::ThreadTime::try_now()
                .ok()
                .map(|t| t.as_duration()),
            wall: Instant::now(),
        }
    }

    /// Milliseconds of this thread's CPU time since the mark (wall time if unavailable).
    pub fn ms(&self) -> f64 {
        let now = cpu_time::ThreadTime::try_now()
            .ok()
            .map(|t| t.as_duration());
        let elapsed = match (self.thread, now) {
            (Some(then), Some(now)) => now.saturating_sub(then),
            _ => self.wall.elapsed(),
        };
        elapsed.as_secs_f64() * 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_work_not_sleep() {
        let t = CpuTimer::start();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let slept = t.ms();
        let t = CpuTimer::start();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let worked = t.ms();
        assert!(slept < 10.0, "sleeping is not CPU time: {slept} ms");
        assert!(worked > 0.0);
    }
}
