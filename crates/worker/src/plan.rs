//! The desired state of a `local` Worker: one machine class, class secret
//! and machine deployment per pool and zone (§4.2, §4.3 steps 1–2).
//!
//! [`plan`] is a pure function of the Worker, the Shoot facts, the image
//! resolver, the user data and the machine deployments that exist; the
//! executor applies its output (create-or-patch the classes and secrets,
//! then the deployments), writes the status from [`crate::status`] and
//! deletes what [`crate::cleanup_plan`] lists.

use std::collections::BTreeMap;

use api::{
    ClassSpec, InPlaceUpdateMachineDeployment, MachineClass, MachineConfiguration,
    MachineDeployment, MachineDeploymentSpec, MachineDeploymentStrategy,
    MachineDeploymentStrategyType, MachineSpec, MachineTemplateSpec, NodeTemplate,
    NodeTemplateSpec, OrchestrationType, RollingUpdateMachineDeployment,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{NodeSpec, Secret, SecretReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::error::Error;
use crate::image::{ImageEntry, ImageRequest, ImageResolver, LocalWorkerStatus, find_image};
use crate::labels;
use crate::naming::{
    in_place_update_hash, machine_class_name, machine_deployment_name, worker_pool_hash,
};
use crate::replicas::{
    ReplicaInputs, cluster_autoscaler_used, desired_replicas, shoot_is_waking_up,
};
use crate::shoot::ShootFacts;
use crate::types::{
    ClusterAutoscalerOptions, MachineControllerManagerSettings, MachineUpdateStrategy, Worker,
    WorkerPool,
};
use crate::zones::{distribute_over_zones, distribute_positive_int_or_percent};

/// The provider name written into classes.
pub const PROVIDER_LOCAL: &str = "local";

/// `minReadySeconds` of every generated deployment.
///
/// Upstream's actuator writes 500, but upstream MCM ignores
/// `minReadySeconds` when it counts available machines, so the value is
/// inert there. trellis's MCM honours it (as a Kubernetes Deployment
/// does), so writing 500 would hold every shoot at "waiting for machines"
/// for more than eight minutes. 0 gives upstream's effective behaviour:
/// a Running machine is available.
pub const MIN_READY_SECONDS: i32 = 0;

/// `revisionHistoryLimit` of every generated deployment: old machine sets
/// are not kept for rollback.
pub const REVISION_HISTORY_LIMIT: i32 = 0;

/// Prefix of the tag naming a VM's cluster in the local provider spec.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// Tag marking a VM as a worker node.
pub const NODE_ROLE_TAG: &str = "kubernetes.io/role/node";

/// Tag carrying the provider image of the VM. trellis' local provider spec
/// has no image field (it rejects unknown fields), so the image travels as a
/// tag, under the name upstream provider-local gives the field.
pub const IMAGE_TAG: &str = "image";

/// How maxSurge/maxUnavailable reach the per-zone deployments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateBoundsDistribution {
    /// Spread over the zones as the AWS reference does: maxSurge relative to
    /// the pool maximum, maxUnavailable relative to the pool minimum (row 44).
    #[default]
    PerZone,
    /// Every zone gets the pool's values, as upstream provider-local does.
    PassThrough,
}

/// A machine deployment that exists, as far as the planner cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExistingDeployment {
    /// Its name.
    pub name: String,
    /// Its `spec.replicas`, owned by the autoscaler when one runs.
    pub replicas: i32,
    /// Annotations of its machine template, which are kept.
    pub template_annotations: BTreeMap<String, String>,
}

impl From<&MachineDeployment> for ExistingDeployment {
    fn from(md: &MachineDeployment) -> ExistingDeployment {
        ExistingDeployment {
            name: md.metadata.name.clone().unwrap_or_default(),
            replicas: md.spec.replicas,
            template_annotations: md
                .spec
                .template
                .metadata
                .annotations
                .clone()
                .unwrap_or_default(),
        }
    }
}

static NO_USER_DATA: BTreeMap<String, Vec<u8>> = BTreeMap::new();
static NO_RESTORED: BTreeMap<String, i32> = BTreeMap::new();

/// Everything [`plan`] reads.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    /// The Worker.
    pub worker: &'a Worker,
    /// The shoot's technical ID, the prefix of deployment names.
    pub technical_id: &'a str,
    /// Namespace of the generated objects (the Worker's).
    pub namespace: &'a str,
    /// Facts from the Cluster's Shoot.
    pub shoot: &'a ShootFacts,
    /// The cloud profile's image mapping.
    pub images: &'a dyn ImageResolver,
    /// The machine deployments in the namespace.
    pub existing: &'a [ExistingDeployment],
    /// Pool name to the user data fetched from its `userDataSecretRef`;
    /// pools missing here fall back to the legacy inline `userData`.
    pub user_data: &'a BTreeMap<String, Vec<u8>>,
    /// Deployment name to replicas from restored shoot state.
    pub restored_replicas: &'a BTreeMap<String, i32>,
    /// How update bounds are spread over zones.
    pub bounds: UpdateBoundsDistribution,
}

impl<'a> PlanInput<'a> {
    /// An input with no existing deployments, no fetched user data, no
    /// restored state and per-zone bounds; set the other fields directly.
    pub fn new(
        worker: &'a Worker,
        technical_id: &'a str,
        shoot: &'a ShootFacts,
        images: &'a dyn ImageResolver,
    ) -> PlanInput<'a> {
        PlanInput {
            worker,
            technical_id,
            namespace: worker.metadata.namespace.as_deref().unwrap_or(technical_id),
            shoot,
            images,
            existing: &[],
            user_data: &NO_USER_DATA,
            restored_replicas: &NO_RESTORED,
            bounds: UpdateBoundsDistribution::default(),
        }
    }
}

/// One wanted deployment with the numbers the status and the health check
/// need (upstream's `worker.MachineDeployment`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WantedDeployment {
    /// Deployment name.
    pub name: String,
    /// Class name (also the class secret's name).
    pub class_name: String,
    /// Class secret name.
    pub secret_name: String,
    /// Pool name.
    pub pool: String,
    /// Zone.
    pub zone: String,
    /// Zone share of the pool minimum.
    pub minimum: i32,
    /// Zone share of the pool maximum.
    pub maximum: i32,
    /// The pool's priority.
    pub priority: Option<i32>,
    /// maxSurge of this deployment.
    pub max_surge: IntOrString,
    /// maxUnavailable of this deployment.
    pub max_unavailable: IntOrString,
    /// The replicas the deployment is given.
    pub replicas: i32,
    /// Every cluster-autoscaler annotation; `""` means "remove it from the
    /// existing deployment".
    pub cluster_autoscaler_annotations: BTreeMap<String, String>,
    /// The pool is updated in place.
    pub in_place: bool,
}

/// A machine-class secret: the pool's user data, labelled for cleanup. The
/// provider credentials are not copied in; classes reach them through
/// `credentialsSecretRef` (upstream today; the contract document still shows
/// them in the class secret).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassSecret {
    /// Name, equal to the class name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Labels: `gardener.cloud/purpose=machineclass`.
    pub labels: BTreeMap<String, String>,
    /// Data: `userData`.
    pub data: BTreeMap<String, Vec<u8>>,
}

impl ClassSecret {
    /// The secret as a Kubernetes object.
    pub fn to_secret(&self) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.labels.clone()),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_string()),
            data: Some(
                self.data
                    .iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }
}

/// The output of [`plan`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DesiredState {
    /// The wanted deployments, pool by pool, zone by zone.
    pub wanted: Vec<WantedDeployment>,
    /// One class per wanted deployment, same order.
    pub machine_classes: Vec<MachineClass>,
    /// One class secret per wanted deployment, same order.
    pub class_secrets: Vec<ClassSecret>,
    /// The deployments to create or patch, same order.
    pub machine_deployments: Vec<MachineDeployment>,
    /// The provider status: the images in use.
    pub provider_status: LocalWorkerStatus,
    /// In-place pool name to its [`in_place_update_hash`].
    pub in_place_hashes: BTreeMap<String, String>,
}

/// Every cluster-autoscaler annotation for a pool, `""` for unset ones so
/// that the executor removes stale values. Durations are written the way Go
/// prints them (`30m0s`).
pub fn cluster_autoscaler_annotations(
    options: Option<&ClusterAutoscalerOptions>,
) -> BTreeMap<String, String> {
    let o = options.cloned().unwrap_or_default();
    let duration = |d: Option<String>| d.map(|s| go_duration(&s)).unwrap_or_default();
    [
        (
            labels::CA_SCALE_DOWN_UTILIZATION_THRESHOLD,
            o.scale_down_utilization_threshold.unwrap_or_default(),
        ),
        (
            labels::CA_SCALE_DOWN_GPU_UTILIZATION_THRESHOLD,
            o.scale_down_gpu_utilization_threshold.unwrap_or_default(),
        ),
        (
            labels::CA_SCALE_DOWN_UNNEEDED_TIME,
            duration(o.scale_down_unneeded_time),
        ),
        (
            labels::CA_SCALE_DOWN_UNREADY_TIME,
            duration(o.scale_down_unready_time),
        ),
        (
            labels::CA_MAX_NODE_PROVISION_TIME,
            duration(o.max_node_provision_time),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A duration as Go's `metav1.Duration` writes it after decoding; left as
/// given if it does not parse (validation reports it elsewhere).
fn go_duration(s: &str) -> String {
    api::parse_duration(s)
        .map(api::format_duration)
        .unwrap_or_else(|| s.to_string())
}

/// The machine configuration of a pool's deployments: the pool's MCM
/// settings with `nodeConditions` joined by commas.
pub fn machine_configuration(
    settings: Option<&MachineControllerManagerSettings>,
) -> MachineConfiguration {
    let Some(s) = settings else {
        return MachineConfiguration::default();
    };
    let duration = |d: &Option<String>| d.as_deref().map(go_duration);
    MachineConfiguration {
        drain_timeout: duration(&s.machine_drain_timeout),
        health_timeout: duration(&s.machine_health_timeout),
        creation_timeout: duration(&s.machine_creation_timeout),
        in_place_update_timeout: duration(&s.in_place_update_timeout),
        machine_preserve_timeout: duration(&s.machine_preserve_timeout),
        disable_health_timeout: s.disable_health_timeout,
        max_evict_retries: s.max_evict_retries,
        node_conditions: (!s.node_conditions.is_empty()).then(|| s.node_conditions.join(",")),
    }
}

/// The `local` provider spec of a class: its zone, the cluster and node-role
/// tags the cloud providers use, and the image tag.
pub fn local_provider_spec(namespace: &str, zone: &str, image: &ImageEntry) -> Value {
    json!({
        "zone": zone,
        "tags": {
            format!("{CLUSTER_TAG_PREFIX}{namespace}"): "1",
            NODE_ROLE_TAG: "1",
            IMAGE_TAG: image.image,
        },
    })
}

fn user_data_for(input: &PlanInput<'_>, pool: &WorkerPool) -> Result<Vec<u8>, Error> {
    input
        .user_data
        .get(&pool.name)
        .cloned()
        .or_else(|| pool.user_data.as_ref().map(|b| b.0.clone()))
        .filter(|d| !d.is_empty())
        .ok_or_else(|| Error::MissingUserData {
            pool: pool.name.clone(),
        })
}

fn strategy(
    pool: &WorkerPool,
    max_surge: &IntOrString,
    max_unavailable: &IntOrString,
) -> MachineDeploymentStrategy {
    match pool.update_strategy {
        Some(
            s @ (MachineUpdateStrategy::AutoInPlaceUpdate
            | MachineUpdateStrategy::ManualInPlaceUpdate),
        ) => MachineDeploymentStrategy {
            type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
            rolling_update: None,
            in_place_update: Some(InPlaceUpdateMachineDeployment {
                max_surge: Some(max_surge.clone()),
                max_unavailable: Some(max_unavailable.clone()),
                orchestration_type: Some(if s == MachineUpdateStrategy::ManualInPlaceUpdate {
                    OrchestrationType::Manual
                } else {
                    OrchestrationType::Auto
                }),
            }),
        },
        _ => MachineDeploymentStrategy {
            type_: Some(MachineDeploymentStrategyType::RollingUpdate),
            rolling_update: Some(RollingUpdateMachineDeployment {
                max_surge: Some(max_surge.clone()),
                max_unavailable: Some(max_unavailable.clone()),
            }),
            in_place_update: None,
        },
    }
}

fn non_empty<K: Ord, V>(map: BTreeMap<K, V>) -> Option<BTreeMap<K, V>> {
    (!map.is_empty()).then_some(map)
}

/// Computes the desired classes, secrets and deployments of a Worker.
pub fn plan(input: &PlanInput<'_>) -> Result<DesiredState, Error> {
    let worker = input.worker;
    let pools = &worker.spec.pools;
    let previous = LocalWorkerStatus::from_provider_status(
        worker
            .status
            .as_ref()
            .and_then(|s| s.provider_status.as_ref()),
    )?;
    let autoscaler = cluster_autoscaler_used(pools);
    let hibernated = input.shoot.hibernated;
    let waking_up = shoot_is_waking_up(hibernated, input.existing.iter().map(|e| e.replicas));
    let worker_name = worker.metadata.name.clone().unwrap_or_default();

    let mut desired = DesiredState::default();
    let mut used_images = Vec::new();
    for pool in pools {
        if pool.zones.is_empty() {
            return Err(Error::NoZones {
                pool: pool.name.clone(),
            });
        }
        let architecture = pool.architecture.as_deref().unwrap_or("amd64");
        let image = find_image(
            input.images,
            &previous,
            &ImageRequest {
                pool: &pool.name,
                name: &pool.machine_image.name,
                version: &pool.machine_image.version,
                architecture,
                machine_type: &pool.machine_type,
            },
        )?;
        let pool_hash = worker_pool_hash(pool, input.shoot)?;
        if pool.is_in_place() {
            desired
                .in_place_hashes
                .insert(pool.name.clone(), in_place_update_hash(pool, input.shoot)?);
        }
        let user_data = user_data_for(input, pool)?;
        let ca_annotations = cluster_autoscaler_annotations(pool.cluster_autoscaler.as_ref());
        let configuration = machine_configuration(pool.machine_controller_manager.as_ref());
        let auto_preserve_max = pool
            .machine_controller_manager
            .as_ref()
            .and_then(|m| m.auto_preserve_failed_machine_max);
        let zone_count = i32::try_from(pool.zones.len()).unwrap_or(i32::MAX);

        for (index, zone) in pool.zones.iter().enumerate() {
            let zone_index = i32::try_from(index).unwrap_or(i32::MAX);
            let name = machine_deployment_name(input.technical_id, &pool.name, index);
            let class_name = machine_class_name(&name, &pool_hash);
            let minimum = distribute_over_zones(zone_index, pool.minimum, zone_count);
            let maximum = distribute_over_zones(zone_index, pool.maximum, zone_count);
            let (max_surge, max_unavailable) = match input.bounds {
                UpdateBoundsDistribution::PerZone => (
                    distribute_positive_int_or_percent(
                        zone_index,
                        &pool.max_surge,
                        zone_count,
                        pool.maximum,
                    )?,
                    distribute_positive_int_or_percent(
                        zone_index,
                        &pool.max_unavailable,
                        zone_count,
                        pool.minimum,
                    )?,
                ),
                UpdateBoundsDistribution::PassThrough => {
                    (pool.max_surge.clone(), pool.max_unavailable.clone())
                }
            };
            let existing = input.existing.iter().find(|e| e.name == name);
            let replicas = desired_replicas(&ReplicaInputs {
                minimum,
                maximum,
                hibernated,
                cluster_autoscaler_used: autoscaler,
                existing: existing.map(|e| e.replicas),
                restored: input.restored_replicas.get(&name).copied(),
                waking_up,
            });
            let wanted = WantedDeployment {
                name: name.clone(),
                class_name: class_name.clone(),
                secret_name: class_name.clone(),
                pool: pool.name.clone(),
                zone: zone.clone(),
                minimum,
                maximum,
                priority: pool.priority,
                max_surge,
                max_unavailable,
                replicas,
                cluster_autoscaler_annotations: ca_annotations.clone(),
                in_place: pool.is_in_place(),
            };

            desired.machine_classes.push(machine_class(
                input,
                pool,
                zone,
                &class_name,
                architecture,
                &image,
            ));
            desired.class_secrets.push(ClassSecret {
                name: class_name.clone(),
                namespace: input.namespace.to_string(),
                labels: BTreeMap::from([(
                    labels::PURPOSE.to_string(),
                    labels::PURPOSE_MACHINE_CLASS.to_string(),
                )]),
                data: BTreeMap::from([(labels::USER_DATA_KEY.to_string(), user_data.clone())]),
            });
            desired.machine_deployments.push(machine_deployment(
                input,
                pool,
                &wanted,
                &worker_name,
                existing,
                &configuration,
                auto_preserve_max.map(|m| distribute_over_zones(zone_index, m, zone_count)),
            ));
            desired.wanted.push(wanted);
        }
        used_images.push(image);
    }
    desired.provider_status = LocalWorkerStatus::with_images(used_images);
    Ok(desired)
}

fn machine_class(
    input: &PlanInput<'_>,
    pool: &WorkerPool,
    zone: &str,
    class_name: &str,
    architecture: &str,
    image: &ImageEntry,
) -> MachineClass {
    let mut class = MachineClass::new(
        class_name,
        PROVIDER_LOCAL,
        local_provider_spec(input.namespace, zone, image),
    );
    class.metadata.namespace = Some(input.namespace.to_string());
    class.metadata.labels = Some(BTreeMap::from([
        (
            labels::OPERATING_SYSTEM_NAME.to_string(),
            pool.machine_image.name.clone(),
        ),
        (
            labels::OPERATING_SYSTEM_VERSION.to_string(),
            pool.machine_image.version.replace('+', "_"),
        ),
        (labels::FAILURE_DOMAIN_ZONE.to_string(), zone.to_string()),
    ]));
    class.node_template = pool.node_template.as_ref().map(|t| NodeTemplate {
        capacity: t.capacity.clone(),
        virtual_capacity: t.virtual_capacity.clone().unwrap_or_default(),
        instance_type: pool.machine_type.clone(),
        region: input.worker.spec.region.clone(),
        zone: zone.to_string(),
        architecture: Some(architecture.to_string()),
    });
    class.credentials_secret_ref = Some(input.worker.spec.secret_ref.clone());
    class.secret_ref = Some(SecretReference {
        name: Some(class_name.to_string()),
        namespace: Some(input.namespace.to_string()),
    });
    class
}

fn machine_deployment(
    input: &PlanInput<'_>,
    pool: &WorkerPool,
    wanted: &WantedDeployment,
    worker_name: &str,
    existing: Option<&ExistingDeployment>,
    configuration: &MachineConfiguration,
    auto_preserve_failed_machine_max: Option<i32>,
) -> MachineDeployment {
    let selector = BTreeMap::from([(
        labels::MACHINE_DEPLOYMENT_NAME.to_string(),
        wanted.name.clone(),
    )]);
    let mut template_labels = selector.clone();
    if wanted.in_place {
        template_labels.insert(labels::WORKER_NAME.to_string(), worker_name.to_string());
    }
    let mut node_labels = pool.labels.clone();
    node_labels
        .entry(labels::WORKER_POOL.to_string())
        .or_insert_with(|| pool.name.clone());
    node_labels.insert(labels::TOPOLOGY_ZONE.to_string(), wanted.zone.clone());
    let annotations: BTreeMap<String, String> = wanted
        .cluster_autoscaler_annotations
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();

    let mut md = MachineDeployment::new(
        &wanted.name,
        MachineDeploymentSpec {
            replicas: wanted.replicas,
            selector: Some(LabelSelector {
                match_labels: Some(selector),
                match_expressions: None,
            }),
            template: MachineTemplateSpec {
                metadata: ObjectMeta {
                    labels: Some(template_labels),
                    annotations: existing.and_then(|e| non_empty(e.template_annotations.clone())),
                    ..ObjectMeta::default()
                },
                spec: MachineSpec {
                    class: ClassSpec {
                        api_group: String::new(),
                        kind: "MachineClass".to_string(),
                        name: wanted.class_name.clone(),
                    },
                    provider_id: String::new(),
                    node_template: NodeTemplateSpec {
                        metadata: ObjectMeta {
                            labels: non_empty(node_labels),
                            annotations: non_empty(pool.annotations.clone()),
                            ..ObjectMeta::default()
                        },
                        spec: NodeSpec {
                            taints: (!pool.taints.is_empty()).then(|| pool.taints.clone()),
                            ..NodeSpec::default()
                        },
                    },
                    configuration: configuration.clone(),
                },
            },
            strategy: strategy(pool, &wanted.max_surge, &wanted.max_unavailable),
            min_ready_seconds: MIN_READY_SECONDS,
            revision_history_limit: Some(REVISION_HISTORY_LIMIT),
            auto_preserve_failed_machine_max,
            ..MachineDeploymentSpec::default()
        },
    );
    md.metadata.namespace = Some(input.namespace.to_string());
    md.metadata.labels = Some(BTreeMap::from([(
        labels::WORKER_POOL.to_string(),
        pool.name.clone(),
    )]));
    md.metadata.annotations = non_empty(annotations);
    md
}
