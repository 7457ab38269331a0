//! Impersonation headers (`Impersonate-User`, `-Group`, `-Uid`,
//! `-Extra-<key>`), as `kubectl --as` and `--as-group` send them. Each part
//! needs the `impersonate` verb on its own resource (users or
//! serviceaccounts, groups, uids, userextras/<key>), checked by RBAC for the
//! authenticated user; then the request continues as the impersonated user.

use apimachinery::ApiError;
use http::HeaderMap;

use super::{Auth, RequestAttributes, UserInfo, forbidden, serviceaccount};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// Applies impersonation headers: `(acting user, Some(authenticated user))`
/// when impersonating, `(user, None)` when not. On failure the error comes
/// with the authenticated user, for the audit log.
pub async fn apply(
    auth: &Auth,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<(UserInfo, Option<UserInfo>), (UserInfo, ApiError)> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|s| s.trim().to_string())
            .collect()
    };
    let names = values(USER);
    let groups = values(GROUP);
    let uids = values(UID);
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX)
            && let Ok(v) = value.to_str()
        {
            // Keys are percent-encoded in the header name (they may hold `/`).
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_lowercase();
            extra.entry(key).or_default().push(v.trim().to_string());
        }
    }
    if names.is_empty() && groups.is_empty() && uids.is_empty() && extra.is_empty() {
        return Ok((user, None));
    }
    let bad = |m: &str| ApiError::bad_request(m.to_string());
    if names.len() != 1 || names[0].is_empty() {
        let e = bad("impersonating requires exactly one Impersonate-User header");
        return Err((user, e));
    }
    if uids.len() > 1 {
        return Err((user, bad("at most one Impersonate-Uid header is allowed")));
    }
    let target = names[0].clone();
    let mut checks = Vec::new();
    let mut new_groups = groups.clone();
    match target.strip_prefix(serviceaccount::SA_PREFIX) {
        Some(rest) => {
            let Some((ns, name)) = rest.split_once(':') else {
                return Err((user, bad("invalid ServiceAccount user name")));
            };
            checks.push(attrs("", "serviceaccounts", "", ns, name));
            // A ServiceAccount is always in its groups.
            if groups.is_empty() {
                new_groups = serviceaccount::groups(ns);
            }
        }
        None => checks.push(attrs("", "users", "", "", &target)),
    }
    for g in &groups {
        checks.push(attrs("", "groups", "", "", g));
    }
    for u in &uids {
        checks.push(attrs("authentication.k8s.io", "uids", "", "", u));
    }
    for (k, vs) in &extra {
        for v in vs {
            checks.push(attrs("authentication.k8s.io", "userextras", k, "", v));
        }
    }
    for a in &checks {
        match auth.rbac.authorize(&auth.storage, &user, a).await {
            Ok(d) if d.allowed => {}
            Ok(d) => {
                let e = forbidden(&user, a, &d.reason);
                return Err((user, e));
            }
            Err(e) => return Err((user, e)),
        }
    }
    if target != "system:anonymous" && !new_groups.iter().any(|g| g == super::AUTHENTICATED_GROUP) {
        new_groups.push(super::AUTHENTICATED_GROUP.to_string());
    }
    let acting = UserInfo {
        username: target,
        uid: uids.into_iter().next().unwrap_or_default(),
        groups: new_groups,
        extra,
    };
    Ok((acting, Some(user)))
}

fn attrs(group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> RequestAttributes {
    RequestAttributes {
        verb: "impersonate".into(),
        resource_request: true,
        path: String::new(),
        api_group: group.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}
