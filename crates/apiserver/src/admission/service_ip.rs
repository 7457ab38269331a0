//! Service cluster IPs, allocated as kube-apiserver's service registry
//! does: a Service without `spec.clusterIP` gets a free address of the
//! service range, one that asks for an address gets it if it is in the
//! range and free, `None` is a headless Service, and the address never
//! changes afterwards.
//!
//! The default range is loopback (`127.2.0.0/16`): on one machine the seed
//! runtime's service proxy listens on these addresses, so Services are
//! reachable without root or iptables (see crates/kubelet).
//!
//! Which addresses are taken is read from the stored Services at each
//! allocation, plus the addresses handed out in the last minute whose
//! Services may not be stored yet (admission runs before the write), so two
//! concurrent creates on this server never get the same address. Servers
//! sharing one store (several replicas on etcd) could still race; a clash
//! is then visible as two Services with one address.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::{ApiError, Cause};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::{AdmissionPlugin, Attributes, Operation};
use crate::storage::{Storage, keys};

/// How long an address handed out stays reserved without a stored Service.
const RESERVATION: Duration = Duration::from_secs(60);

/// An IPv4 range in CIDR form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Range {
    base: u32,
    prefix: u8,
}

impl Ipv4Range {
    /// Parses `a.b.c.d/n` (n from 8 to 30).
    pub fn parse(s: &str) -> Result<Ipv4Range, String> {
        let (addr, bits) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR (address/prefix)"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|e| format!("{s:?} is not a CIDR: {e}"))?;
        let prefix: u8 = bits
            .parse()
            .map_err(|_| format!("{s:?} has no valid prefix length"))?;
        if !(8..=30).contains(&prefix) {
            return Err(format!("{s:?}: the prefix length must be between 8 and 30"));
        }
        let mask = u32::MAX << (32 - prefix);
        Ok(Ipv4Range {
            base: u32::from(addr) & mask,
            prefix,
        })
    }

    fn size(&self) -> u32 {
        1 << (32 - self.prefix)
    }

    /// Whether `ip` is a usable address of the range (not the network or
    /// broadcast address).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        ip > self.base && ip < self.base + self.size() - 1
    }

    /// The `i`-th usable address (0-based), wrapping around.
    fn nth(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.base + 1 + i % (self.size() - 2))
    }
}

impl std::fmt::Display for Ipv4Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

/// The first free address of `range`, probing from a place derived from
/// `seed` (so Services get spread-out addresses).
pub fn pick(range: &Ipv4Range, taken: &HashSet<Ipv4Addr>, seed: &str) -> Option<Ipv4Addr> {
    let start = seed.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let usable = range.size() - 2;
    (0..usable)
        .map(|i| range.nth(start.wrapping_add(i)))
        .find(|ip| !taken.contains(ip))
}

/// The cluster IP a Service object asks for: `None` (not set), the string
/// (`"None"` for headless, or an address).
fn asked(obj: &Value) -> Option<String> {
    obj.pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| {
            obj.pointer("/spec/clusterIPs/0")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
}

fn set_ip(obj: &mut Value, ip: &str) {
    obj["spec"]["clusterIP"] = json!(ip);
    obj["spec"]["clusterIPs"] = json!([ip]);
    if ip != "None" {
        if obj.pointer("/spec/ipFamilies").is_none() {
            obj["spec"]["ipFamilies"] = json!(["IPv4"]);
        }
        if obj.pointer("/spec/ipFamilyPolicy").is_none() {
            obj["spec"]["ipFamilyPolicy"] = json!("SingleStack");
        }
    }
}

fn invalid(name: &str, cause: Cause) -> ApiError {
    ApiError::invalid("", "Service", name, vec![cause])
}

/// Allocates and keeps Service cluster IPs.
pub struct ServiceIps {
    storage: Arc<Storage>,
    range: Ipv4Range,
    recent: Mutex<HashMap<Ipv4Addr, Instant>>,
    /// Mixed into every pick, so two servers on one machine (whose seed
    /// runtimes share the loopback range) do not give the same Service
    /// names the same addresses.
    salt: u32,
}

impl ServiceIps {
    pub fn new(storage: Arc<Storage>, range: Ipv4Range) -> ServiceIps {
        ServiceIps {
            storage,
            range,
            recent: Mutex::new(HashMap::new()),
            salt: rand::random(),
        }
    }

    /// Addresses of every stored Service but `except` (namespace, name).
    async fn taken(&self, except: (&str, &str)) -> Result<HashSet<Ipv4Addr>, ApiError> {
        let mut taken = HashSet::new();
        for kv in self.storage.range(&keys::prefix(keys::SERVICES)).await? {
            let Ok(svc) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let ns = svc.pointer("/metadata/namespace").and_then(Value::as_str);
            let name = svc.pointer("/metadata/name").and_then(Value::as_str);
            if (ns, name) == (Some(except.0), Some(except.1)) {
                continue;
            }
            if let Some(ip) = asked(&svc).and_then(|s| s.parse().ok()) {
                taken.insert(ip);
            }
        }
        Ok(taken)
    }

    async fn on_create(&self, ns: &str, name: &str, obj: &mut Value) -> Result<(), ApiError> {
        if obj.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
            return Ok(());
        }
        let asked = asked(obj);
        if asked.as_deref() == Some("None") {
            set_ip(obj, "None");
            return Ok(());
        }
        let taken = self.taken((ns, name)).await?;
        let mut recent = self.recent.lock();
        recent.retain(|_, at| at.elapsed() < RESERVATION);
        let ip = match asked {
            Some(s) => {
                let ip: Ipv4Addr = s.parse().map_err(|_| {
                    invalid(
                        name,
                        Cause::invalid(
                            "spec.clusterIPs[0]",
                            format!("Invalid value: {s:?}: must be a valid IP address"),
                        ),
                    )
                })?;
                if !self.range.contains(ip) {
                    return Err(invalid(
                        name,
                        Cause::invalid(
                            "spec.clusterIPs",
                            format!(
                                "Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
                                self.range
                            ),
                        ),
                    ));
                }
                if taken.contains(&ip) || recent.contains_key(&ip) {
                    return Err(invalid(
                        name,
                        Cause::invalid(
                            "spec.clusterIPs",
                            format!(
                                "Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: provided IP is already allocated"
                            ),
                        ),
                    ));
                }
                ip
            }
            None => {
                let busy: HashSet<Ipv4Addr> = taken
                    .union(&recent.keys().copied().collect())
                    .copied()
                    .collect();
                pick(
                    &self.range,
                    &busy,
                    &format!("{:08x}/{ns}/{name}", self.salt),
                )
                .ok_or_else(|| {
                    ApiError::internal(format!(
                        "failed to allocate a serviceIP: range {} is full",
                        self.range
                    ))
                })?
            }
        };
        recent.insert(ip, Instant::now());
        set_ip(obj, &ip.to_string());
        Ok(())
    }
}

/// An update keeps the address: an empty one is filled from the stored
/// object, a different one is refused.
pub fn keep_on_update(name: &str, obj: &mut Value, old: &Value) -> Result<(), ApiError> {
    let Some(before) = asked(old) else {
        return Ok(());
    };
    if obj.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Ok(());
    }
    match asked(obj) {
        None => {
            set_ip(obj, &before);
            Ok(())
        }
        Some(now) if now == before => {
            if obj.pointer("/spec/clusterIPs").is_none() {
                set_ip(obj, &before);
            }
            Ok(())
        }
        Some(now) => Err(invalid(
            name,
            Cause::invalid(
                "spec.clusterIPs[0]",
                format!("Invalid value: {now:?}: may not change once set"),
            ),
        )),
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for ServiceIps {
    fn name(&self) -> &str {
        "ServiceClusterIPAllocation"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        let res = attrs.resource;
        if !(res.builtin && res.group.is_empty() && res.kind == "Service")
            || attrs.subresource.is_some()
        {
            return Ok(());
        }
        match (attrs.operation, attrs.old) {
            (Operation::Create, _) => {
                self.on_create(attrs.namespace.unwrap_or_default(), attrs.name, obj)
                    .await
            }
            (Operation::Update, Some(old)) => keep_on_update(attrs.name, obj, old),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_hold_their_usable_addresses() {
        let r = Ipv4Range::parse("127.2.0.0/16").unwrap();
        assert_eq!(r.to_string(), "127.2.0.0/16");
        assert!(r.contains("127.2.0.1".parse().unwrap()));
        assert!(r.contains("127.2.255.254".parse().unwrap()));
        assert!(!r.contains("127.2.0.0".parse().unwrap()));
        assert!(!r.contains("127.2.255.255".parse().unwrap()));
        assert!(!r.contains("10.96.0.1".parse().unwrap()));
        assert_eq!(Ipv4Range::parse("127.2.3.4/16").unwrap(), r);
        for bad in ["127.2.0.0", "x/16", "127.2.0.0/31", "127.2.0.0/4"] {
            assert!(Ipv4Range::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn picking_skips_taken_addresses_and_fills_the_range() {
        let r = Ipv4Range::parse("10.0.0.0/30").unwrap(); // two usable
        let mut taken = HashSet::new();
        let a = pick(&r, &taken, "ns/a").unwrap();
        assert!(r.contains(a));
        taken.insert(a);
        let b = pick(&r, &taken, "ns/a").unwrap();
        assert_ne!(a, b);
        taken.insert(b);
        assert_eq!(pick(&r, &taken, "ns/c"), None);
    }

    #[test]
    fn updates_keep_the_address() {
        let old = json!({"spec": {"clusterIP": "127.2.0.9", "clusterIPs": ["127.2.0.9"]}});
        let mut dropped = json!({"spec": {"ports": []}});
        keep_on_update("s", &mut dropped, &old).unwrap();
        assert_eq!(dropped["spec"]["clusterIP"], "127.2.0.9");
        assert_eq!(dropped["spec"]["clusterIPs"], json!(["127.2.0.9"]));
        let mut changed = json!({"spec": {"clusterIP": "127.2.0.10"}});
        let e = keep_on_update("s", &mut changed, &old).unwrap_err();
        assert_eq!(e.code, 422);
        let mut same = json!({"spec": {"clusterIP": "127.2.0.9"}});
        keep_on_update("s", &mut same, &old).unwrap();
    }

    #[tokio::test]
    async fn services_get_distinct_addresses_in_the_range_and_keep_asked_ones() {
        let storage = Arc::new(Storage::new(Arc::new(store::MemoryStore::new())));
        let range = Ipv4Range::parse("127.2.0.0/16").unwrap();
        let ips = ServiceIps::new(storage.clone(), range);
        let mut seen = HashSet::new();
        for i in 0..20 {
            let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
            ips.on_create("default", &format!("s{i}"), &mut svc)
                .await
                .unwrap();
            let ip: Ipv4Addr = svc["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
            assert!(range.contains(ip));
            assert!(seen.insert(ip), "{ip} handed out twice");
            assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv4"]));
        }
        // An address asked for is kept when free, refused when taken or
        // out of range; "None" is headless.
        let mut asked = json!({"spec": {"clusterIP": "127.2.9.9"}});
        ips.on_create("default", "asked", &mut asked).await.unwrap();
        assert_eq!(asked["spec"]["clusterIPs"], json!(["127.2.9.9"]));
        let mut again = json!({"spec": {"clusterIP": "127.2.9.9"}});
        let e = ips
            .on_create("default", "again", &mut again)
            .await
            .unwrap_err();
        assert!(e.message.contains("already allocated"), "{}", e.message);
        let mut outside = json!({"spec": {"clusterIP": "10.96.0.10"}});
        let e = ips
            .on_create("default", "outside", &mut outside)
            .await
            .unwrap_err();
        assert!(
            e.message.contains("not in the valid range"),
            "{}",
            e.message
        );
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        ips.on_create("default", "peer", &mut headless)
            .await
            .unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "x.example"}});
        ips.on_create("default", "ext", &mut external)
            .await
            .unwrap();
        assert!(external["spec"].get("clusterIP").is_none());
    }
}
