//! Figures from the suite (issue 17): wire fuzzing, fault injection on the
//! model connection, crash faults, a cancel storm and concurrency, each
//! seeded (`TANDEM_FUZZ_SEED`) and sized for CI; RELIABILITY.md records
//! the figures and the commands for longer runs.

mod gen;

mod cancel_storm;
mod concurrency;
mod crash;
mod faults;
mod fuzz;
mod fuzz_cases;
