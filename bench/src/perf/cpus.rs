//! The busy threads of one side of a two-host run, the CPU each was
//! pinned to, and whether two of them shared a CPU: threads that take
//! turns on one CPU measure the scheduler's time slices as much as
//! uwarp, as the loopback's core-to-core round trip shows when its ends
//! share one.
//!
//! The threads that poll while a run measures:
//!
//! - on DPDK without `--cpus`, one: the measuring thread, which runs the
//!   device's cores inline (nothing of the run can share its CPU);
//! - on DPDK with `--cpus`, the control core's thread and each dataplane
//!   core's, pinned as `--cpus` says (as `uwarp-perf tcp --cpus` pins
//!   them), and the measuring thread, which nothing pins;
//! - on the socket transport, the measuring thread and the transport's
//!   dataplane thread, both unpinned.
//!
//! Decided as the loopback decides whether its two ends get a CPU each
//! (from the CPUs this process may use, as `transport::cpus` lists them), not
//! measured: two threads pinned to one CPU shared it; more busy threads
//! than CPUs shared some; unpinned threads with CPUs enough may have, as
//! the OS placed them. Other processes (the peer's, on one machine) are
//! not counted.

use serde_json::{json, Value};
use uwarp_dataplane::runtime::Placement;

use super::transport::cpus;

/// One busy thread: what it runs, and the CPU it was pinned to (`None`:
/// unpinned).
pub type Thread = (String, Option<usize>);

/// The busy threads of one side, and the CPUs it could use.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuUse {
    /// The threads.
    pub threads: Vec<Thread>,
    /// How many CPUs this process may run on.
    pub available: usize,
}

/// Whether two busy threads shared a CPU, and why it is so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sharing {
    /// Every busy thread had a CPU of its own (or there was one).
    No(String),
    /// Two or more shared one.
    Yes(String),
    /// Unpinned threads may have, as the OS placed them.
    Maybe(String),
}

impl CpuUse {
    /// A DPDK side whose cores run as `placement` says: inline on the
    /// measuring thread when unpinned, else on threads of their own.
    pub fn dpdk(placement: &Placement) -> Self {
        let threads = match placement {
            Placement::Unpinned => vec![("measuring thread, running the cores".into(), None)],
            Placement::Pinned {
                control,
                dataplanes,
            } => {
                let mut threads = vec![("control core".to_string(), Some(*control))];
                for (i, cpu) in dataplanes.iter().enumerate() {
                    threads.push((format!("dataplane core {i}"), Some(*cpu)));
                }
                threads.push(("measuring thread".into(), None));
                threads
            }
        };
        Self::of(threads)
    }

    /// A side on the kernel-socket transport.
    pub fn socket() -> Self {
        Self::of(vec![
            ("measuring thread".into(), None),
            ("socket dataplane thread".into(), None),
        ])
    }

    /// `threads` in this process.
    fn of(threads: Vec<Thread>) -> Self {
        CpuUse {
            threads,
            available: cpus().len(),
        }
    }

    /// Whether two threads shared a CPU.
    pub fn sharing(&self) -> Sharing {
        let pinned: Vec<(&str, usize)> = self
            .threads
            .iter()
            .filter_map(|(name, cpu)| Some((name.as_str(), (*cpu)?)))
            .collect();
        for (i, (first, cpu)) in pinned.iter().enumerate() {
            let same: Vec<&str> = pinned[i + 1..]
                .iter()
                .filter(|(_, other)| other == cpu)
                .map(|(name, _)| *name)
                .collect();
            if !same.is_empty() {
                return Sharing::Yes(format!(
                    "the {first} and the {} are pinned to CPU {cpu}",
                    same.join(" and the ")
                ));
            }
        }
        let busy = self.threads.len();
        if busy > self.available {
            let cpus = match self.available {
                1 => "1 CPU".to_string(),
                n => format!("{n} CPUs"),
            };
            return Sharing::Yes(format!("{busy} busy threads on {cpus}"));
        }
        let unpinned: Vec<&str> = self
            .threads
            .iter()
            .filter(|(_, cpu)| cpu.is_none())
            .map(|(name, _)| name.as_str())
            .collect();
        match (busy, unpinned.as_slice()) {
            (1, _) => Sharing::No("one busy thread".into()),
            (_, []) => Sharing::No("a CPU of its own for each busy thread".into()),
            (_, unpinned) => Sharing::Maybe(format!(
                "the OS places the {}, which may share a CPU with another busy thread",
                unpinned.join(" and the ")
            )),
        }
    }

    /// One JSON object: `threads` (each `name` and `cpu`, null where
    /// unpinned), `available_cpus`, `shared_cpu` (true, false, or null
    /// for maybe) and `sharing`, why.
    pub fn to_json(&self) -> Value {
        let threads: Vec<Value> = self
            .threads
            .iter()
            .map(|(name, cpu)| json!({ "name": name, "cpu": cpu }))
            .collect();
        let (shared, why) = match self.sharing() {
            Sharing::No(why) => (Some(false), why),
            Sharing::Yes(why) => (Some(true), why),
            Sharing::Maybe(why) => (None, why),
        };
        json!({
            "threads": threads,
            "available_cpus": self.available,
            "shared_cpu": shared,
            "sharing": why,
        })
    }

    /// One line for people: each thread's CPU, then whether the run
    /// shared a CPU, and why.
    pub fn to_text(&self) -> String {
        let threads: Vec<String> = self
            .threads
            .iter()
            .map(|(name, cpu)| match cpu {
                Some(cpu) => format!("{name} on CPU {cpu}"),
                None => format!("{name} unpinned"),
            })
            .collect();
        let verdict = match self.sharing() {
            Sharing::No(why) => format!("no CPU shared ({why})"),
            Sharing::Yes(why) => format!("shared a CPU: {why}"),
            Sharing::Maybe(why) => format!("may have shared a CPU: {why}"),
        };
        format!(
            "CPUs of this side ({} available): {}; {verdict}\n",
            self.available,
            threads.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(available: usize, threads: CpuUse) -> Sharing {
        CpuUse {
            available,
            ..threads
        }
        .sharing()
    }

    fn pinned(control: usize, dataplanes: &[usize]) -> CpuUse {
        CpuUse::dpdk(&Placement::Pinned {
            control,
            dataplanes: dataplanes.to_vec(),
        })
    }

    #[test]
    fn cores_inline_on_the_measuring_thread_share_nothing() {
        let inline = CpuUse::dpdk(&Placement::Unpinned);
        assert_eq!(inline.threads.len(), 1);
        assert_eq!(on(1, inline.clone()), Sharing::No("one busy thread".into()));
        assert_eq!(on(8, inline), Sharing::No("one busy thread".into()));
    }

    /// Whether the threads shared a CPU, said as [`Sharing::Yes`] does.
    fn shared(why: &str) -> Sharing {
        Sharing::Yes(why.into())
    }

    #[test]
    fn two_cores_pinned_to_one_cpu_share_it() {
        let one = "the control core and the dataplane core 0 are pinned to CPU 1";
        assert_eq!(on(8, pinned(1, &[1])), shared(one));
        let three = "the dataplane core 0 and the dataplane core 1 and the dataplane core 2 \
                     are pinned to CPU 2";
        assert_eq!(on(8, pinned(0, &[2, 2, 2])), shared(three));
    }

    #[test]
    fn more_busy_threads_than_cpus_share_some() {
        // The control core, the dataplane core and the measuring thread.
        let threads = pinned(0, &[1]);
        assert_eq!(on(2, threads), shared("3 busy threads on 2 CPUs"));
        assert_eq!(on(1, CpuUse::socket()), shared("2 busy threads on 1 CPU"));
    }

    #[test]
    fn unpinned_threads_with_cpus_enough_may_share() {
        let Sharing::Maybe(why) = on(4, pinned(0, &[1])) else {
            panic!("not maybe");
        };
        assert!(
            why.starts_with("the OS places the measuring thread, "),
            "{why}"
        );
        assert!(matches!(on(2, CpuUse::socket()), Sharing::Maybe(_)));
    }

    #[test]
    fn the_report_names_each_thread_and_the_verdict() {
        let use_ = CpuUse {
            available: 2,
            ..pinned(0, &[1])
        };
        assert_eq!(
            use_.to_text(),
            "CPUs of this side (2 available): control core on CPU 0, dataplane core 0 on \
             CPU 1, measuring thread unpinned; shared a CPU: 3 busy threads on 2 CPUs\n"
        );
        let json = use_.to_json();
        assert_eq!(json["shared_cpu"], true);
        assert_eq!(
            json["threads"][1],
            json!({"name": "dataplane core 0", "cpu": 1})
        );
        assert!(json["threads"][2]["cpu"].is_null());
        let maybe = CpuUse {
            available: 2,
            ..CpuUse::socket()
        };
        assert!(maybe.to_json()["shared_cpu"].is_null());
    }
}
