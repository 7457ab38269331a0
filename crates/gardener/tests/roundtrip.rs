//! Upstream-style YAML (the seeds' examples, adapted to what upstream
//! built) reads into the types and writes back to the same JSON, and the
//! generated CRDs carry what the API server needs.

use gardener::*;
use serde_json::Value;

/// Parses `yaml` into `T`, writes it back, and checks nothing was lost or
/// added.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(yaml: &str) -> T {
    let original: Value = serde_yaml::from_str(yaml).expect("valid YAML");
    let typed: T = serde_yaml::from_str(yaml).expect("YAML matches the types");
    let back = serde_json::to_value(&typed).expect("serializes");
    assert_eq!(back, original, "round trip changed the object");
    typed
}

// GEP-33's example (seed 000) written the way upstream built it:
// `machineCapabilities` as an ordered list instead of a `capabilities` map
// and `capabilityFlavors` instead of `capabilitySets`.
const CAPABILITY_PROFILE: &str = r#"
apiVersion: core.gardener.cloud/v1beta1
kind: CloudProfile
metadata:
  name: azure
spec:
  type: azure
  kubernetes:
    versions:
      - version: 1.31.2
        classification: supported
      - version: 1.30.5
        expirationDate: "2026-06-06T01:02:03Z"
        classification: deprecated
      - version: 1.29.9
        lifecycle:
          - classification: supported
          - classification: deprecated
            startTime: "2025-01-01T00:00:00Z"
          - classification: expired
            startTime: "2026-01-01T00:00:00Z"
  machineCapabilities:
    - name: architecture
      values: [amd64, arm64]
    - name: hypervisorType
      values: [gen2, gen1]
    - name: network
      values: [accelerated, standard]
  machineImages:
    - name: gardenlinux
      updateStrategy: minor
      versions:
        - version: 1592.2.0
          classification: supported
          architectures: [amd64, arm64]
          cri:
            - name: containerd
              containerRuntimes: [{type: gvisor}]
          kubeletVersionConstraint: ">= 1.26"
          inPlaceUpdates: {supported: true, minVersionForUpdate: 1592.1.0}
          capabilityFlavors:
            - architecture: [arm64]
              hypervisorType: [gen2]
              network: [accelerated, standard]
            - architecture: [amd64]
              hypervisorType: [gen2]
            - architecture: [amd64]
              hypervisorType: [gen1]
        - version: 1592.1.0
          classification: supported
          capabilityFlavors:
            - architecture: [amd64]
  machineTypes:
    - name: Standard_S896om
      cpu: "896"
      gpu: "0"
      memory: 12Ti
      usable: true
      architecture: amd64
      capabilities:
        architecture: [amd64]
        hypervisorType: [gen2]
      storage: {class: premium, type: Premium_LRS, minSize: 20Gi}
      machineControllerManager: {machineCreationTimeout: 20m}
  volumeTypes:
    - {name: Premium_LRS, class: premium, usable: true, minSize: 10Gi}
  regions:
    - name: westeurope
      labels: {eu: "true"}
      accessRestrictions: [{name: eu-access-only}]
      zones:
        - name: "1"
          unavailableMachineTypes: [Standard_S896om]
        - name: "2"
          unavailableVolumeTypes: [Premium_LRS]
  providerConfig:
    apiVersion: azure.provider.extensions.gardener.cloud/v1alpha1
    kind: CloudProfileConfig
    machineImages:
      - name: gardenlinux
        versions:
          - version: 1592.2.0
            capabilities: {architecture: [arm64], hypervisorType: [gen2]}
            communityGalleryImageID: /CommunityGalleries/xzy/Images/gardenlinux-nvme-arm64-gen2/Versions/1592.2.0
  caBundle: |
    -----BEGIN CERTIFICATE-----
    MIIBszCCAVmgAwIBAgIU
    -----END CERTIFICATE-----
  seedSelector:
    matchLabels: {provider: azure}
    providerTypes: [azure]
  bastion:
    machineImage: {name: gardenlinux}
    machineType: {name: Standard_S896om}
  limits: {maxNodesTotal: 100}
status:
  kubernetes:
    versions: [{version: 1.31.2, classification: supported}]
  machineImages:
    - name: gardenlinux
      versions: [{version: 1592.2.0, classification: supported}]
"#;

#[test]
fn capability_cloud_profile_round_trips() {
    let cp: CloudProfile = round_trip(CAPABILITY_PROFILE);
    assert_eq!(cp.spec.machine_capabilities[1].name, "hypervisorType");
    assert_eq!(
        cp.spec.machine_images[0].versions[0]
            .capability_flavors
            .len(),
        3
    );
    assert_eq!(cp.spec.kubernetes.versions[2].lifecycle.len(), 3);
    // A real profile from the GEP passes our own validation.
    let causes = gardener::validation::validate_cloud_profile_spec(&cp.spec);
    assert_eq!(causes, vec![], "{causes:#?}");
}

// GEP-25's rendering example (seed 001). Differences from the seed text:
// versions are quoted (`version: 15.4` is a YAML float; kubectl turns it
// into a JSON number that Go's decoder rejects for a string, and so do
// we), the malformed `2023-08-8T23:59:59Z` is
// written `2023-08-08T23:59:59Z`, and `status.cloudProfileSpec` replaces
// the GEP's `status.cloudProfile` wrapper, as upstream built it.
const NAMESPACED_PROFILE: &str = r#"
apiVersion: core.gardener.cloud/v1beta1
kind: NamespacedCloudProfile
metadata:
  name: aws-profile-xyz
  namespace: project-xyz
spec:
  parent:
    kind: CloudProfile
    name: aws-central-cloud-profile
  kubernetes:
    versions:
      - version: 1.28.6
        expirationDate: "2024-06-06T01:02:03Z"
  machineImages:
    - name: suse-chost
      versions:
        - version: "16.4"
          expirationDate: "2023-08-08T23:59:59Z"
  machineTypes:
    - name: m5.xlarge
      cpu: "8"
      gpu: "0"
      memory: 16Gi
  volumeTypes:
    - name: ab6
      class: premium
      usable: true
  limits: {maxNodesTotal: 20}
  providerConfig: {apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1, kind: CloudProfileConfig}
status:
  observedGeneration: 2
  cloudProfileSpec:
    type: aws
    kubernetes:
      versions: [{version: 1.28.6, expirationDate: "2024-06-06T01:02:03Z"}]
    machineImages:
      - name: suse-chost
        versions: [{version: "15.4"}]
    machineTypes:
      - {name: m5.large, cpu: "4", gpu: "0", memory: 8Gi}
    regions: [{name: eu-west-1}]
"#;

#[test]
fn namespaced_cloud_profile_round_trips() {
    let ncp: NamespacedCloudProfile = round_trip(NAMESPACED_PROFILE);
    assert_eq!(ncp.spec.parent.name, "aws-central-cloud-profile");
    assert_eq!(
        ncp.status.as_ref().and_then(|s| s.observed_generation),
        Some(2)
    );
}

const SHOOT: &str = r#"
apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata:
  name: my-shoot
  namespace: project-xyz
spec:
  cloudProfile: {kind: NamespacedCloudProfile, name: aws-profile-xyz}
  region: eu-west-1
  secretBindingName: my-secret
  credentialsBindingName: my-credentials
  purpose: evaluation
  seedName: aws-eu1
  kubernetes: {version: 1.31.2}
  hibernation:
    enabled: false
    schedules: [{start: "00 20 * * 1,2,3,4,5", end: "00 08 * * 1,2,3,4,5", location: Europe/Berlin}]
  maintenance:
    autoUpdate: {kubernetesVersion: true, machineImageVersion: false}
    timeWindow: {begin: 220000+0100, end: 230000+0100}
  provider:
    type: aws
    infrastructureConfig: {apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1, kind: InfrastructureConfig, networks: {vpc: {cidr: 10.250.0.0/16}}}
    workers:
      - name: cpu-worker
        minimum: 2
        maximum: 5
        maxSurge: 1
        maxUnavailable: 0
        machine:
          type: m5.large
          image: {name: gardenlinux, version: 1592.2.0}
          architecture: amd64
        volume: {type: gp3, size: 50Gi}
        zones: [eu-west-1a, eu-west-1b]
        labels: {team: a}
        annotations: {note: x}
        taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
        cri: {name: containerd}
        kubernetes: {version: 1.30.5}
        updateStrategy: AutoRollingUpdate
        machineControllerManager: {machineDrainTimeout: 2h, nodeConditions: [ReadonlyFilesystem]}
        providerConfig: {apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1, kind: WorkerConfig}
status:
  technicalID: shoot--project-xyz--my-shoot
  observedGeneration: 4
  hibernated: false
  lastOperation: {type: Reconcile, state: Succeeded, progress: 100, description: done, lastUpdateTime: "2026-01-01T00:00:00Z"}
  lastErrors: [{description: boom, taskID: t1, codes: [ERR_INFRA_QUOTA_EXCEEDED]}]
  conditions:
    - {type: EveryNodeReady, status: "True", reason: AllReady, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z", lastUpdateTime: "2026-01-01T00:00:00Z"}
  lastMaintenance: {description: "Machine image updated", state: Succeeded, triggeredTime: "2026-01-01T00:00:00Z"}
"#;

#[test]
fn shoot_round_trips() {
    let shoot: Shoot = round_trip(SHOOT);
    assert_eq!(
        shoot.spec.provider.workers[0].kubernetes_version(),
        Some("1.30.5")
    );
    assert_eq!(
        shoot.status.as_ref().map(|s| s.technical_id.as_str()),
        Some("shoot--project-xyz--my-shoot")
    );
}

#[test]
fn malformed_values_are_rejected_not_guessed() {
    // An unquoted float version (GEP-25's `version: 16.4`), an unknown
    // classification and a malformed date are errors.
    assert!(serde_yaml::from_str::<MachineImageVersion>("version: 16.4").is_err());
    assert!(
        serde_yaml::from_str::<ExpirableVersion>("{version: '1.0.0', classification: stable}")
            .is_err()
    );
    assert!(
        serde_yaml::from_str::<ExpirableVersion>(
            "{version: '1.0.0', expirationDate: '2023-08-8T23:59:59Z'}"
        )
        .is_err()
    );
}

fn crd(
    name: &str,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("CRD {name} exists"))
}

#[test]
fn crds_have_scope_short_names_and_status() {
    let cp = crd("cloudprofiles.core.gardener.cloud");
    assert_eq!(cp.spec.scope, "Cluster");
    assert_eq!(
        cp.spec.names.short_names,
        Some(vec!["cprofile".into(), "cpfl".into()])
    );
    let ncp = crd("namespacedcloudprofiles.core.gardener.cloud");
    assert_eq!(ncp.spec.scope, "Namespaced");
    assert_eq!(ncp.spec.names.short_names, Some(vec!["nscpfl".into()]));
    let shoot = crd("shoots.core.gardener.cloud");
    assert_eq!(shoot.spec.scope, "Namespaced");
    for c in [&cp, &ncp, &shoot] {
        let v = &c.spec.versions[0];
        assert_eq!(v.name, "v1beta1");
        assert!(
            v.subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{} has status",
            c.spec.names.kind
        );
        assert!(
            v.additional_printer_columns
                .as_ref()
                .is_some_and(|p| !p.is_empty())
        );
    }
}

#[test]
fn provider_config_is_preserved_unknown_in_the_schema() {
    let cp = crd("cloudprofiles.core.gardener.cloud");
    let schema = serde_json::to_value(&cp.spec.versions[0].schema).expect("schema serializes");
    let pc = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["providerConfig"];
    assert_eq!(
        pc["x-kubernetes-preserve-unknown-fields"],
        Value::Bool(true),
        "{pc}"
    );
    let yaml = crds_yaml();
    assert_eq!(yaml.matches("kind: CustomResourceDefinition").count(), 3);
    // Structural: no `$ref` or `anyOf` without types left by schemars.
    assert!(!yaml.contains("$ref"));
}

#[test]
fn the_shoot_crd_keeps_fields_it_does_not_model() {
    let crd = gardener::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "Shoot")
        .unwrap();
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let root = &schema["openAPIV3Schema"];
    assert_eq!(
        root["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    let worker =
        &root["properties"]["spec"]["properties"]["provider"]["properties"]["workers"]["items"];
    assert_eq!(worker["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(
        worker["properties"]["machine"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    // Modelled fields keep their types.
    assert_eq!(worker["properties"]["minimum"]["type"], "integer");
}
