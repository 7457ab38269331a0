//! The choice of provider for a call, a pure function of what the call
//! needs served ([`Want`]) and what the registered providers offer
//! ([`Offer`]): the newest provider of the class's name, else the only
//! provider there is, and for class migration whoever translates the kind.
//! Also the error a call gets when nobody can take it, with the code that
//! says whether waiting helps.

use super::*;

/// One provider as [`choose`] sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offer<'a> {
    pub providers: &'a [String],
    pub kinds: &'a [String],
}

/// What a call needs served.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Want<'a> {
    /// Calls on a class: the class's `provider` (`""` when it names none).
    Class { provider: &'a str, class: &'a str },
    /// `GenerateMachineClassForMigration`: the class's provider if it names
    /// one, else whoever translates `kind`.
    Migration { provider: &'a str, kind: &'a str },
}

/// Every provider name on offer, sorted, for messages.
fn registered(offers: &[Offer]) -> Vec<String> {
    let names: BTreeSet<&String> = offers.iter().flat_map(|o| o.providers).collect();
    names.into_iter().cloned().collect()
}

fn listing(names: &[String]) -> String {
    if names.is_empty() {
        "registered: none".to_string()
    } else {
        format!("registered: {}", names.join(", "))
    }
}

/// The offer that serves `want`: the newest (last) one serving the name.
/// A class that names no provider goes to the only provider there is, as
/// in-process, where the one linked driver takes every class. Returns the
/// offer's index and the provider name it serves the call as.
pub(crate) fn choose(
    call: Call,
    offers: &[Offer],
    want: Want,
) -> Result<(usize, String), DriverError> {
    let serving = |name: &str| {
        offers
            .iter()
            .rposition(|o| o.providers.iter().any(|p| p == name))
    };
    let names = registered(offers);
    let only = || match names.as_slice() {
        [one] => serving(one).map(|i| (i, one.clone())),
        _ => None,
    };
    let by_name = |provider: &str| {
        serving(provider)
            .map(|i| (i, provider.to_string()))
            .ok_or_else(|| {
                DriverError::new(
                    Code::Unavailable,
                    format!(
                        "no provider {provider:?} is registered with the machine-controller-manager ({}); {call} is retried until one registers",
                        listing(&names)
                    ),
                )
            })
    };
    // Nobody there yet is worth waiting for; providers that are there
    // but cannot take the call are the class's problem.
    let code_if_any = |code| {
        if names.is_empty() {
            Code::Unavailable
        } else {
            code
        }
    };
    match want {
        Want::Class { provider, .. } if !provider.is_empty() => by_name(provider),
        Want::Migration { provider, .. } if !provider.is_empty() => by_name(provider),
        Want::Class { class, .. } => only().ok_or_else(|| {
            DriverError::new(
                code_if_any(Code::InvalidArgument),
                format!(
                    "machine class {class:?} names no provider, and the machine-controller-manager cannot pick one ({}); set the class's provider",
                    listing(&names)
                ),
            )
        }),
        Want::Migration { kind, .. } => offers
            .iter()
            .rposition(|o| o.kinds.iter().any(|k| k == kind))
            .map(|i| (i, offers[i].providers.first().cloned().unwrap_or_default()))
            .or_else(only)
            .ok_or_else(|| {
                DriverError::new(
                    code_if_any(Code::Unimplemented),
                    format!(
                        "no registered provider translates class kind {kind:?} ({})",
                        listing(&names)
                    ),
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn class(provider: &str) -> Want<'_> {
        Want::Class {
            provider,
            class: "c1",
        }
    }

    #[test]
    fn the_newest_provider_of_a_name_takes_the_call() {
        let (local, aws, aws2, none) = (
            names(&["local"]),
            names(&["aws", "gcp"]),
            names(&["aws"]),
            names(&[]),
        );
        let offers = [
            Offer {
                providers: &local,
                kinds: &none,
            },
            Offer {
                providers: &aws,
                kinds: &none,
            },
            Offer {
                providers: &aws2,
                kinds: &none,
            },
        ];
        let pick = |want| choose(Call::CreateMachine, &offers, want);
        assert_eq!(pick(class("local")), Ok((0, "local".into())));
        assert_eq!(pick(class("aws")), Ok((2, "aws".into())));
        assert_eq!(pick(class("gcp")), Ok((1, "gcp".into())));
        let e = pick(class("azure")).unwrap_err();
        assert_eq!(e.code, Code::Unavailable);
        assert!(
            e.message.contains("no provider \"azure\" is registered")
                && e.message.contains("registered: aws, gcp, local")
                && e.message.contains("CreateMachine"),
            "{e}"
        );
        // Several providers and a class naming none: the class must say.
        let e = pick(class("")).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("names no provider"), "{e}");
    }

    #[test]
    fn a_class_naming_no_provider_goes_to_the_only_one() {
        let (local, none) = (names(&["local"]), names(&[]));
        let one = [Offer {
            providers: &local,
            kinds: &none,
        }];
        assert_eq!(
            choose(Call::ListMachines, &one, class("")),
            Ok((0, "local".into()))
        );
        let e = choose(Call::ListMachines, &[], class("")).unwrap_err();
        assert_eq!(e.code, Code::Unavailable, "nobody there yet: wait");
        let e = choose(Call::ListMachines, &[], class("local")).unwrap_err();
        assert_eq!(e.code, Code::Unavailable);
        assert!(e.message.contains("registered: none"), "{e}");
    }

    #[test]
    fn migration_goes_by_provider_then_kind_then_the_only_one() {
        let (aws, gcp, aws_kinds, gcp_kinds) = (
            names(&["aws"]),
            names(&["gcp"]),
            names(&["AWSMachineClass"]),
            names(&["GCPMachineClass"]),
        );
        let offers = [
            Offer {
                providers: &aws,
                kinds: &aws_kinds,
            },
            Offer {
                providers: &gcp,
                kinds: &gcp_kinds,
            },
        ];
        let call = Call::GenerateMachineClassForMigration;
        let m = |provider, kind| Want::Migration { provider, kind };
        assert_eq!(
            choose(call, &offers, m("gcp", "AWSMachineClass"))
                .unwrap()
                .0,
            1
        );
        assert_eq!(
            choose(call, &offers, m("", "AWSMachineClass")).unwrap().0,
            0
        );
        let e = choose(call, &offers, m("", "OtherClass")).unwrap_err();
        assert_eq!(e.code, Code::Unimplemented);
        assert_eq!(
            choose(call, &offers[..1], m("", "OtherClass")).unwrap().0,
            0
        );
        assert_eq!(
            choose(call, &[], m("", "X")).unwrap_err().code,
            Code::Unavailable
        );
    }
}
