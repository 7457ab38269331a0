//! Spreading a pool's sizes and update bounds over its zones (§4.2).
//!
//! Upstream's doc comment claims the last zone gets the extra machine; its
//! code (and so this module) gives the remainder to the **first** zones.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::Error;

/// The share of `size` that zone `zone_index` (0-based) of `zone_count`
/// zones gets: `size / n`, plus one for the first `size % n` zones. With no
/// zones there is nothing to share and the result is 0.
pub fn distribute_over_zones(zone_index: i32, size: i32, zone_count: i32) -> i32 {
    if zone_count <= 0 {
        return 0;
    }
    size / zone_count + i32::from(zone_index < size % zone_count)
}

/// Parses `"NN%"`.
fn parse_percent(value: &str) -> Result<i64, Error> {
    value
        .strip_suffix('%')
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(|| Error::InvalidPercent {
            value: value.to_string(),
        })
}

/// A percentage of a pool's `total` for zone `zone_index`: unchanged when
/// the total splits evenly over the zones; otherwise weighted by the zone's
/// share of the total and rounded up, so a bigger zone gets a bigger
/// percentage. The float operations run in upstream's order so the rounding
/// matches it exactly.
pub fn distribute_percent_over_zones(
    zone_index: i32,
    percent: &str,
    zone_count: i32,
    total: i32,
) -> Result<String, Error> {
    let percents = parse_percent(percent)?;
    if zone_count <= 0 || total % zone_count == 0 {
        return Ok(format!("{percents}%"));
    }
    let zone_total = distribute_over_zones(zone_index, total, zone_count);
    let absolute_total_ratio = f64::from(total) / f64::from(zone_count);
    let ratio = 100.0 / absolute_total_ratio * f64::from(zone_total);
    let weighted = (ratio * percents as f64 / 100.0).ceil();
    Ok(format!("{}%", weighted as i64))
}

/// [`distribute_percent_over_zones`] for percentages,
/// [`distribute_over_zones`] for integers.
pub fn distribute_positive_int_or_percent(
    zone_index: i32,
    value: &IntOrString,
    zone_count: i32,
    total: i32,
) -> Result<IntOrString, Error> {
    match value {
        IntOrString::String(s) => Ok(IntOrString::String(distribute_percent_over_zones(
            zone_index, s, zone_count, total,
        )?)),
        IntOrString::Int(i) => Ok(IntOrString::Int(distribute_over_zones(
            zone_index, *i, zone_count,
        ))),
    }
}
