//! What the drop-in libraries print, on standard error only (standard
//! output is the application's: perftest's reports are parsed by
//! scripts), as `UWARP_LOG` asks:
//!
//! - `error` (the default): one line for each failure an `errno` alone
//!   cannot explain (a wrong setting, a device that cannot open), and
//!   DPDK's own errors;
//! - `info`: also the device opened (its transport and address) and
//!   DPDK's notices;
//! - `off`: nothing of the library's, and of DPDK's only emergencies.

use std::fmt::Arguments;
use std::sync::OnceLock;

/// How much the library prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing.
    Off,
    /// Failures.
    Error,
    /// Failures and what the device is.
    Info,
}

impl Level {
    /// The level `UWARP_LOG` names (unset or empty: [`Level::Error`]); an
    /// unknown name is itself an error, reported once and treated as
    /// `error`.
    fn from_env() -> Level {
        match std::env::var("UWARP_LOG").as_deref() {
            Err(_) | Ok("") | Ok("error") => Level::Error,
            Ok("off") => Level::Off,
            Ok("info") => Level::Info,
            Ok(other) => {
                eprintln!("uwarp: UWARP_LOG={other}: the levels are: off, error, info");
                Level::Error
            }
        }
    }

    /// The EAL's `--log-level` argument for this level.
    pub fn eal_argument(self) -> &'static str {
        match self {
            Level::Off => "--log-level=emergency",
            Level::Error => "--log-level=error",
            Level::Info => "--log-level=notice",
        }
    }
}

/// The process's level, read from the environment once.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(Level::from_env)
}

/// Prints "uwarp: MESSAGE" on standard error when the level is `at` or
/// more.
pub fn print(at: Level, message: Arguments<'_>) {
    if level() >= at && at > Level::Off {
        eprintln!("uwarp: {message}");
    }
}
