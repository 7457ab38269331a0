//! Pod IPs from a loopback range. Linux routes all of 127.0.0.0/8 to `lo`
//! without configuration, so every pod can have an address of its own, and
//! two pods can both listen on the same port, without root and without
//! network namespaces.
//!
//! The address is chosen once per pod, recorded in the pod's state
//! directory, and reused after a trellis restart; it is free again when the
//! pod's directory goes. The first candidate comes from a hash of the pod
//! UID, so addresses spread over the range and a just-freed address is
//! rarely handed out again at once (stale endpoints point nowhere rather
//! than at a stranger).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// A range of addresses: `base/prefix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub base: Ipv4Addr,
    pub prefix: u8,
}

/// Pod IPs: 127.1.0.0/16.
pub const POD_RANGE: Range = Range {
    base: Ipv4Addr::new(127, 1, 0, 0),
    prefix: 16,
};

/// Where the lead's service allocation should take ClusterIPs from, so the
/// runtime's proxy can listen on them: 127.2.0.0/16.
pub const SERVICE_RANGE: Range = Range {
    base: Ipv4Addr::new(127, 2, 0, 0),
    prefix: 16,
};

impl Range {
    /// Parses `a.b.c.d/n` (n between 8 and 30, inside 127.0.0.0/8).
    pub fn parse(s: &str) -> Result<Range, String> {
        let (ip, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR"))?;
        let base: Ipv4Addr = ip
            .parse()
            .map_err(|_| format!("{ip:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| format!("{prefix:?} is not a prefix length"))?;
        if !(8..=30).contains(&prefix) {
            return Err(format!("prefix /{prefix} must be between /8 and /30"));
        }
        if base.octets()[0] != 127 {
            return Err(format!("{s} is not loopback (127.0.0.0/8)"));
        }
        let mask = u32::MAX << (32 - prefix);
        Ok(Range {
            base: Ipv4Addr::from(u32::from(base) & mask),
            prefix,
        })
    }

    /// Usable addresses: all but the first and the last.
    fn size(&self) -> u32 {
        (1u32 << (32 - self.prefix)) - 2
    }

    fn nth(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + 1 + i)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - self.prefix);
        u32::from(ip) & mask == u32::from(self.base)
    }
}

/// FNV-1a, for a stable first candidate.
fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// The address for pod `uid`: the first free one from its hash on, or
/// `None` when the range is full.
pub fn allocate(range: Range, used: &BTreeSet<Ipv4Addr>, uid: &str) -> Option<Ipv4Addr> {
    let n = range.size();
    let start = fnv(uid) % n;
    (0..n)
        .map(|i| range.nth((start + i) % n))
        .find(|ip| !used.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_stable_distinct_and_inside_the_range() {
        let mut used = BTreeSet::new();
        for i in 0..1000 {
            let ip = allocate(POD_RANGE, &used, &format!("uid-{i}")).unwrap();
            assert!(POD_RANGE.contains(ip));
            assert_ne!(ip, Ipv4Addr::new(127, 1, 0, 0));
            assert_ne!(ip, Ipv4Addr::new(127, 1, 255, 255));
            assert!(used.insert(ip), "{ip} handed out twice");
        }
        let empty = BTreeSet::new();
        assert_eq!(
            allocate(POD_RANGE, &empty, "a"),
            allocate(POD_RANGE, &empty, "a")
        );
    }

    #[test]
    fn a_full_range_has_no_address() {
        let tiny = Range::parse("127.9.0.0/30").unwrap();
        let mut used = BTreeSet::new();
        used.insert(allocate(tiny, &used, "a").unwrap());
        used.insert(allocate(tiny, &used, "b").unwrap());
        assert_eq!(used.len(), 2);
        assert_eq!(allocate(tiny, &used, "c"), None);
    }

    #[test]
    fn parse_table() {
        assert_eq!(Range::parse("127.1.2.3/16").unwrap(), POD_RANGE);
        for bad in [
            "10.0.0.0/16",
            "127.0.0.0",
            "127.0.0.0/4",
            "127.0.0.0/31",
            "x/16",
            "127.0.0.0/x",
        ] {
            assert!(Range::parse(bad).is_err(), "{bad}");
        }
    }
}
