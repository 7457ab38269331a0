//! The provider's own error type (for starting it and for the fault API),
//! and the mapping from API status codes to machine error codes that every
//! driver call uses.

use driver::Code;

/// A failed provider step outside the driver calls (those answer with
/// [`driver::DriverError`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Listing the VM records at start failed.
    #[error("loading the local VM inventory: {0}")]
    LoadInventory(#[source] kube::Error),
    /// Deleting a VM record failed.
    #[error("deleting the record of VM {vm}: {source}")]
    DeleteRecord {
        /// The VM ID.
        vm: String,
        /// The API error.
        source: kube::Error,
    },
}

/// The machine error code for a failed control-cluster API call, chosen by
/// what the machine controller should do next: transient trouble (conflict,
/// throttling, server errors) retries soon; a rejected request or missing
/// permission is reported as such.
pub fn code_for_status(status: u16) -> Code {
    match status {
        400 | 422 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        409 => Code::Aborted,
        429 | 502..=504 => Code::Unavailable,
        500 => Code::Internal,
        _ => Code::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_machine_codes() {
        let cases = [
            (400, Code::InvalidArgument),
            (422, Code::InvalidArgument),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::NotFound),
            (409, Code::Aborted),
            (429, Code::Unavailable),
            (503, Code::Unavailable),
            (500, Code::Internal),
            (418, Code::Unknown),
        ];
        for (status, want) in cases {
            assert_eq!(code_for_status(status), want, "{status}");
        }
    }
}
