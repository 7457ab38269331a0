//! Failpoints: making a driver's next calls fail with a chosen code.
//!
//! Simulated providers offer this so that tests can drive the machine
//! controller through every error path, and the conformance kit uses it to
//! check that a driver passes codes through unchanged. [`FaultInjector`] is
//! the hook the kit needs; [`Failpoints`] is a ready implementation a driver
//! can embed and consult at the top of each method.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::{Call, Code, DriverError};

/// A driver whose calls can be made to fail on demand.
pub trait FaultInjector: Send + Sync {
    /// Makes the next `times` calls of `call` fail with `code`, before they
    /// look at or change any VM. Arming a call again replaces what was left
    /// of the previous arming; `times == 0` or `Code::Ok` disarms it.
    fn fail_next(&self, call: Call, code: Code, times: u32);
}

/// A table of armed failures, one entry per call.
#[derive(Debug, Default)]
pub struct Failpoints {
    armed: Mutex<HashMap<Call, (Code, u32)>>,
}

impl Failpoints {
    /// No call armed.
    pub fn new() -> Failpoints {
        Failpoints::default()
    }

    /// Consumes one armed failure of `call`: `Err` with the armed code while
    /// any are left, `Ok(())` otherwise. A driver calls this first thing in
    /// every method and returns the error unchanged.
    pub fn check(&self, call: Call) -> Result<(), DriverError> {
        let mut armed = self.lock();
        let Some((code, left)) = armed.get_mut(&call) else {
            return Ok(());
        };
        let code = *code;
        *left -= 1;
        if *left == 0 {
            armed.remove(&call);
        }
        Err(DriverError::new(
            code,
            format!("failpoint: {call} fails with {code}"),
        ))
    }

    /// How many failures of `call` are still armed.
    pub fn pending(&self, call: Call) -> u32 {
        self.lock().get(&call).map_or(0, |(_, left)| *left)
    }

    // A panic while holding the lock cannot leave the table half-updated
    // (every change is a single insert or decrement), so a poisoned lock is
    // still safe to use.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Call, (Code, u32)>> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl FaultInjector for Failpoints {
    fn fail_next(&self, call: Call, code: Code, times: u32) {
        let mut armed = self.lock();
        if times == 0 || code == Code::Ok {
            armed.remove(&call);
        } else {
            armed.insert(call, (code, times));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armed_failures_are_consumed_per_call() {
        let f = Failpoints::new();
        assert_eq!(f.check(Call::CreateMachine), Ok(()));
        f.fail_next(Call::CreateMachine, Code::Unavailable, 2);
        f.fail_next(Call::DeleteMachine, Code::Internal, 1);
        for _ in 0..2 {
            let err = f.check(Call::CreateMachine).unwrap_err();
            assert_eq!(err.code, Code::Unavailable);
            assert!(!err.message.is_empty());
        }
        assert_eq!(f.check(Call::CreateMachine), Ok(()));
        assert_eq!(f.pending(Call::DeleteMachine), 1);
        assert_eq!(
            f.check(Call::DeleteMachine).unwrap_err().code,
            Code::Internal
        );
        assert_eq!(f.check(Call::DeleteMachine), Ok(()));
    }

    #[test]
    fn rearming_replaces_and_zero_or_ok_disarm() {
        let f = Failpoints::new();
        f.fail_next(Call::ListMachines, Code::Unknown, 5);
        f.fail_next(Call::ListMachines, Code::Aborted, 1);
        assert_eq!(f.pending(Call::ListMachines), 1);
        assert_eq!(f.check(Call::ListMachines).unwrap_err().code, Code::Aborted);
        for (code, times) in [(Code::Internal, 0), (Code::Ok, 3)] {
            f.fail_next(Call::ListMachines, Code::Unknown, 5);
            f.fail_next(Call::ListMachines, code, times);
            assert_eq!(f.check(Call::ListMachines), Ok(()));
        }
    }
}
