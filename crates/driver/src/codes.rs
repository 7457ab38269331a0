//! Machine error codes and the error every driver call returns.
//!
//! The codes are gRPC's status codes 0–16 with the same numbers, plus
//! `Uninitialized` (17), which MCM added for a VM that exists but whose
//! post-create initialization has not finished (seed 003 §2.11, spec §2.2).
//!
//! A code has two spellings and both matter:
//!
//! * the camel-case name (`ResourceExhausted`) is what upstream's `String()`
//!   prints. It is written to `lastOperation.errorCode`, where the cluster
//!   autoscaler compares it to decide on back-off, and it appears inside
//!   `lastOperation.description`, where a new `OutOfRange` starts an orphan-VM
//!   scan (spec §2.1, §2.2). [`Display`](fmt::Display) therefore prints this
//!   name, so that `err.to_string()` in a status is always correct.
//! * the upper-case name (`RESOURCE_EXHAUSTED`) is the one used in the error
//!   code tables of the driver documentation and in gRPC's JSON form;
//!   [`Code::upper_name`] returns it.
//!
//! [`FromStr`] accepts both, plus the two variant spellings found in the wild.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Call;

/// Status code of a driver call. Numbers follow gRPC, so `code as u32` is the
/// wire value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Code {
    /// The call succeeded. Never carried by a [`DriverError`] in practice; it
    /// exists so that codes read from a status round-trip.
    Ok = 0,
    /// The caller cancelled the call; the driver cleaned up and returned.
    Canceled = 1,
    /// The driver cannot say what went wrong. Treated as transient.
    Unknown = 2,
    /// The request itself is wrong (machine name, provider spec); retrying
    /// the same request cannot help.
    InvalidArgument = 3,
    /// The call ran past its deadline. Treated as transient.
    DeadlineExceeded = 4,
    /// No VM backs the machine. For `GetMachineStatus` this is the signal to
    /// create one; for `DeleteMachine` it means the work is already done.
    NotFound = 5,
    /// A VM of that name exists but does not match the request.
    AlreadyExists = 6,
    /// The credentials lack a permission the call needs.
    PermissionDenied = 7,
    /// A quota or capacity limit stops the creation. Has its own, longer,
    /// retry period (`--resource-exhausted-retry`) and makes the cluster
    /// autoscaler back off the pool.
    ResourceExhausted = 8,
    /// The VM is in a state the call cannot work from (the driver docs call
    /// it `PRECONDITION_FAILED`).
    FailedPrecondition = 9,
    /// Another operation on the same VM is still running. Treated as
    /// transient.
    Aborted = 10,
    /// A requested size is outside the provider's range; from
    /// `GetMachineStatus` it means several VMs claim the machine, which the
    /// orphan-VM collector resolves.
    OutOfRange = 11,
    /// The driver does not offer this call. Optional calls return it by
    /// default; the controller skips or falls back, see [`crate::Outcome`].
    Unimplemented = 12,
    /// An invariant of the provider is broken.
    Internal = 13,
    /// The provider's API cannot be reached right now. Treated as transient.
    Unavailable = 14,
    /// Unrecoverable loss of data. Present for gRPC parity; no driver call
    /// documents it.
    DataLoss = 15,
    /// The credentials are missing or invalid.
    Unauthenticated = 16,
    /// The VM exists but is not initialized; `InitializeMachine` has to run
    /// (again). MCM's addition to the gRPC set.
    Uninitialized = 17,
}

/// One row per code: the code, its camel-case name and its upper-case name.
/// Kept as a single table so that the three views cannot drift apart.
const NAMES: [(Code, &str, &str); 18] = [
    (Code::Ok, "OK", "OK"),
    (Code::Canceled, "Canceled", "CANCELED"),
    (Code::Unknown, "Unknown", "UNKNOWN"),
    (Code::InvalidArgument, "InvalidArgument", "INVALID_ARGUMENT"),
    (
        Code::DeadlineExceeded,
        "DeadlineExceeded",
        "DEADLINE_EXCEEDED",
    ),
    (Code::NotFound, "NotFound", "NOT_FOUND"),
    (Code::AlreadyExists, "AlreadyExists", "ALREADY_EXISTS"),
    (
        Code::PermissionDenied,
        "PermissionDenied",
        "PERMISSION_DENIED",
    ),
    (
        Code::ResourceExhausted,
        "ResourceExhausted",
        "RESOURCE_EXHAUSTED",
    ),
    (
        Code::FailedPrecondition,
        "FailedPrecondition",
        "FAILED_PRECONDITION",
    ),
    (Code::Aborted, "Aborted", "ABORTED"),
    (Code::OutOfRange, "OutOfRange", "OUT_OF_RANGE"),
    (Code::Unimplemented, "Unimplemented", "UNIMPLEMENTED"),
    (Code::Internal, "Internal", "INTERNAL"),
    (Code::Unavailable, "Unavailable", "UNAVAILABLE"),
    (Code::DataLoss, "DataLoss", "DATA_LOSS"),
    (Code::Unauthenticated, "Unauthenticated", "UNAUTHENTICATED"),
    (Code::Uninitialized, "Uninitialized", "UNINITIALIZED"),
];

/// Other spellings accepted by [`FromStr`]: gRPC's JSON mapping writes
/// `CANCELLED`, and the driver documentation's tables write
/// `PRECONDITION_FAILED`. Both name codes we already have, so refusing them
/// would only turn a readable status into a parse error.
const ALIASES: [(&str, Code); 2] = [
    ("CANCELLED", Code::Canceled),
    ("PRECONDITION_FAILED", Code::FailedPrecondition),
];

impl Code {
    /// Every code, in numeric order.
    pub const ALL: [Code; 18] = [
        Code::Ok,
        Code::Canceled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
        Code::Uninitialized,
    ];

    /// The numeric value (gRPC numbering, `Uninitialized` = 17).
    pub fn value(self) -> u32 {
        self as u32
    }

    /// The camel-case name upstream writes to `lastOperation.errorCode`,
    /// e.g. `ResourceExhausted`. Same as [`Display`](fmt::Display).
    pub fn name(self) -> &'static str {
        NAMES[self as usize].1
    }

    /// The upper-case name of the driver documentation's tables and gRPC's
    /// JSON form, e.g. `RESOURCE_EXHAUSTED`.
    pub fn upper_name(self) -> &'static str {
        NAMES[self as usize].2
    }

    /// The codes the machine controller retries after the short period at
    /// every call site (spec §2.1 create-error handler, §2.4 S1 and S4): the
    /// provider may well answer differently a few seconds later.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Code::Unknown | Code::DeadlineExceeded | Code::Aborted | Code::Unavailable
        )
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string or number that names no [`Code`] or [`Call`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {input:?}")]
pub struct ParseError {
    /// What was being parsed: `machine error code` or `driver call`.
    pub kind: &'static str,
    /// The rejected input.
    pub input: String,
}

impl ParseError {
    pub(crate) fn new(kind: &'static str, input: impl Into<String>) -> ParseError {
        ParseError {
            kind,
            input: input.into(),
        }
    }
}

impl FromStr for Code {
    type Err = ParseError;

    /// Parses the camel-case name, the upper-case name or an alias. Unlike
    /// upstream, which maps anything unrecognised to `Unknown`, an unknown
    /// string is an error: a silently wrong code would pick a wrong retry
    /// period, and the caller can still choose `Unknown` itself.
    fn from_str(s: &str) -> Result<Code, ParseError> {
        NAMES
            .iter()
            .find(|(_, camel, upper)| *camel == s || *upper == s)
            .map(|(code, _, _)| *code)
            .or_else(|| {
                ALIASES
                    .iter()
                    .find(|(alias, _)| *alias == s)
                    .map(|(_, code)| *code)
            })
            .ok_or_else(|| ParseError::new("machine error code", s))
    }
}

impl TryFrom<u32> for Code {
    type Error = ParseError;

    fn try_from(value: u32) -> Result<Code, ParseError> {
        Code::ALL
            .get(value as usize)
            .copied()
            .ok_or_else(|| ParseError::new("machine error code", value.to_string()))
    }
}

// Serialized as the camel-case name, the form a machine status carries.
impl Serialize for Code {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Code, D::Error> {
        let s = String::deserialize(de)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The error of every driver call: a code that decides what the controller
/// does next, and a message for humans.
///
/// The message ends up in `lastOperation.description` and in events, so it
/// must say what failed and must not contain credentials. The driver contract
/// requires it to be non-empty for every code other than `Ok`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct DriverError {
    /// What kind of failure this is.
    pub code: Code,
    /// Human-readable detail.
    pub message: String,
}

impl DriverError {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> DriverError {
        DriverError {
            code,
            message: message.into(),
        }
    }

    /// The answer of a driver that does not offer `call`; the default of
    /// every optional method of [`crate::Driver`].
    pub fn unimplemented(call: Call) -> DriverError {
        DriverError::new(
            Code::Unimplemented,
            format!("the driver does not implement {call}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // (code, number, camel-case name, upper-case name)
    const TABLE: [(Code, u32, &str, &str); 18] = [
        (Code::Ok, 0, "OK", "OK"),
        (Code::Canceled, 1, "Canceled", "CANCELED"),
        (Code::Unknown, 2, "Unknown", "UNKNOWN"),
        (
            Code::InvalidArgument,
            3,
            "InvalidArgument",
            "INVALID_ARGUMENT",
        ),
        (
            Code::DeadlineExceeded,
            4,
            "DeadlineExceeded",
            "DEADLINE_EXCEEDED",
        ),
        (Code::NotFound, 5, "NotFound", "NOT_FOUND"),
        (Code::AlreadyExists, 6, "AlreadyExists", "ALREADY_EXISTS"),
        (
            Code::PermissionDenied,
            7,
            "PermissionDenied",
            "PERMISSION_DENIED",
        ),
        (
            Code::ResourceExhausted,
            8,
            "ResourceExhausted",
            "RESOURCE_EXHAUSTED",
        ),
        (
            Code::FailedPrecondition,
            9,
            "FailedPrecondition",
            "FAILED_PRECONDITION",
        ),
        (Code::Aborted, 10, "Aborted", "ABORTED"),
        (Code::OutOfRange, 11, "OutOfRange", "OUT_OF_RANGE"),
        (Code::Unimplemented, 12, "Unimplemented", "UNIMPLEMENTED"),
        (Code::Internal, 13, "Internal", "INTERNAL"),
        (Code::Unavailable, 14, "Unavailable", "UNAVAILABLE"),
        (Code::DataLoss, 15, "DataLoss", "DATA_LOSS"),
        (
            Code::Unauthenticated,
            16,
            "Unauthenticated",
            "UNAUTHENTICATED",
        ),
        (Code::Uninitialized, 17, "Uninitialized", "UNINITIALIZED"),
    ];

    #[test]
    fn numbers_and_names() {
        assert_eq!(Code::ALL.len(), TABLE.len());
        for (i, (code, value, camel, upper)) in TABLE.into_iter().enumerate() {
            assert_eq!(Code::ALL[i], code);
            assert_eq!(code.value(), value, "{code:?}");
            assert_eq!(code.to_string(), camel);
            assert_eq!(code.name(), camel);
            assert_eq!(code.upper_name(), upper);
            assert_eq!(camel.parse::<Code>(), Ok(code));
            assert_eq!(upper.parse::<Code>(), Ok(code));
            assert_eq!(Code::try_from(value), Ok(code));
        }
    }

    #[test]
    fn aliases_and_rejects() {
        for (input, want) in [
            ("CANCELLED", Ok(Code::Canceled)),
            ("PRECONDITION_FAILED", Ok(Code::FailedPrecondition)),
            ("resource_exhausted", Err(())),
            ("Initialization", Err(())),
            ("", Err(())),
            ("17", Err(())),
        ] {
            assert_eq!(input.parse::<Code>().map_err(|_| ()), want, "{input:?}");
        }
        assert!(Code::try_from(18).is_err());
    }

    #[test]
    fn transient_codes() {
        let transient: Vec<Code> = Code::ALL.into_iter().filter(|c| c.is_transient()).collect();
        assert_eq!(
            transient,
            [
                Code::Unknown,
                Code::DeadlineExceeded,
                Code::Aborted,
                Code::Unavailable
            ]
        );
    }

    #[test]
    fn serde_uses_camel_case_and_reads_both() {
        assert_eq!(
            serde_json::to_string(&Code::ResourceExhausted).unwrap(),
            "\"ResourceExhausted\""
        );
        for s in ["\"OutOfRange\"", "\"OUT_OF_RANGE\""] {
            assert_eq!(serde_json::from_str::<Code>(s).unwrap(), Code::OutOfRange);
        }
        assert!(serde_json::from_str::<Code>("\"Nope\"").is_err());
    }

    #[test]
    fn error_display_names_the_code() {
        // The orphan-VM scan looks for `OutOfRange` in the description the
        // controller builds from this string (spec §2.2).
        let e = DriverError::new(Code::OutOfRange, "two VMs claim machine m1");
        assert_eq!(e.to_string(), "OutOfRange: two VMs claim machine m1");
        let u = DriverError::unimplemented(Call::GetVolumeIds);
        assert_eq!(u.code, Code::Unimplemented);
        assert!(u.message.contains("GetVolumeIDs"));
    }
}
