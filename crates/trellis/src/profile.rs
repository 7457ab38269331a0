//! `trellis profile`: operator tools for cloud profiles.
//!
//! * `images` lists the image versions a machine type can boot, with the
//!   capability flavor that would be chosen for it (GEP-33's dashboard
//!   filter), reading the profile from the API server — a CloudProfile, or
//!   a NamespacedCloudProfile rendered against its parent.
//! * `render` renders an NCP against its parent offline, from files.

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;
use gardener::Capabilities;
use gardener::capabilities;
use gardener::{
    CloudProfile, CloudProfileSpec, KIND_CLOUD_PROFILE, NamespacedCloudProfile, lifecycle, render,
};
use kube::api::Api;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List the image versions usable on a machine type, each with the
    /// capability flavor that would be chosen.
    Images(ImagesArgs),
    /// Render a NamespacedCloudProfile against its parent CloudProfile,
    /// offline, and print the resulting profile spec as YAML.
    Render(RenderArgs),
}

#[derive(clap::Args)]
pub struct ImagesArgs {
    /// The CloudProfile, or with --namespace the NamespacedCloudProfile.
    #[arg(long)]
    profile: String,
    /// Namespace of a NamespacedCloudProfile.
    #[arg(short, long)]
    namespace: Option<String>,
    /// The machine type.
    #[arg(long)]
    machine_type: String,
    #[command(flatten)]
    connection: crate::status::Connection,
}

#[derive(clap::Args)]
pub struct RenderArgs {
    /// The parent CloudProfile manifest (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    parent: PathBuf,
    /// The NamespacedCloudProfile manifest.
    #[arg(long, value_name = "FILE")]
    ncp: PathBuf,
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Images(args) => images(args).await,
        Command::Render(args) => {
            crate::status::write_stdout(&render_files(&args.parent, &args.ncp)?)
        }
    }
}

fn read_yaml<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The rendered spec of `ncp` against `parent`, as YAML.
pub fn render_files(parent: &std::path::Path, ncp: &std::path::Path) -> anyhow::Result<String> {
    let parent: CloudProfile = read_yaml(parent)?;
    let ncp: NamespacedCloudProfile = read_yaml(ncp)?;
    let parent_name = parent.metadata.name.clone().unwrap_or_default();
    anyhow::ensure!(
        ncp.spec.parent.name == parent_name,
        "the NamespacedCloudProfile's parent is {:?}, not {parent_name:?}",
        ncp.spec.parent.name
    );
    let rendered = render::render(&parent.spec, &ncp.spec);
    Ok(serde_yaml::to_string(&rendered)?)
}

/// One usable image version on a machine type.
#[derive(Debug, PartialEq)]
pub struct Usable {
    pub image: String,
    pub version: String,
    pub classification: String,
    /// The chosen flavor, or why none could be chosen.
    pub flavor: Result<Option<Capabilities>, String>,
}

/// Every active image version that `machine_type` can boot, with the
/// flavor selection would pick.
pub fn usable_images(
    profile: &CloudProfileSpec,
    machine_type: &str,
) -> anyhow::Result<Vec<Usable>> {
    let now = Utc::now();
    let t = profile
        .machine_type(machine_type)
        .with_context(|| format!("the profile has no machine type {machine_type:?}"))?;
    let defs = &profile.machine_capabilities;
    let mut out = Vec::new();
    for (image, version) in gardener::maintenance::compatible_image_versions(profile, t, now) {
        let Some(v) = profile
            .machine_image(image)
            .and_then(|i| i.version(version))
        else {
            continue;
        };
        let flavor = capabilities::select_flavor(&t.capabilities, &v.capability_flavors, defs)
            .map(|i| i.map(|i| capabilities::defaulted(&v.capability_flavors[i], defs)))
            .map_err(|e| e.to_string());
        out.push(Usable {
            image: image.to_string(),
            version: version.to_string(),
            classification: format!("{:?}", lifecycle::classification(&v.expirable, now))
                .to_lowercase(),
            flavor,
        });
    }
    Ok(out)
}

fn show(c: &Capabilities) -> String {
    c.iter()
        .map(|(k, v)| format!("{k}={}", v.join("|")))
        .collect::<Vec<_>>()
        .join(",")
}

/// The table `profile images` prints.
pub fn images_table(rows: &[Usable]) -> String {
    if rows.is_empty() {
        return "No image version can boot this machine type.\n".into();
    }
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.image.clone(),
                r.version.clone(),
                r.classification.clone(),
                match &r.flavor {
                    Ok(Some(f)) => show(f),
                    Ok(None) => "(no flavors)".into(),
                    Err(e) => format!("error: {e}"),
                },
            ]
        })
        .collect();
    let header = [
        "IMAGE".to_string(),
        "VERSION".into(),
        "CLASSIFICATION".into(),
        "FLAVOR".into(),
    ];
    let mut w = [0usize; 3];
    for r in std::iter::once(&header).chain(&cells) {
        for i in 0..3 {
            w[i] = w[i].max(r[i].chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&cells) {
        out.push_str(&format!(
            "{:w0$}  {:w1$}  {:w2$}  {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2]
        ));
    }
    out
}

async fn images(args: ImagesArgs) -> anyhow::Result<()> {
    let connected = args.connection.connect().await?;
    let spec = read_spec(&args, connected.client.clone())
        .await
        .map_err(|e| connected.explain(e))?;
    crate::status::write_stdout(&images_table(&usable_images(&spec, &args.machine_type)?))
}

/// The CloudProfile spec `args` names: the profile's own, or the
/// NamespacedCloudProfile's rendered over its parent.
async fn read_spec(args: &ImagesArgs, client: kube::Client) -> anyhow::Result<CloudProfileSpec> {
    let spec =
        match &args.namespace {
            None => {
                let api: Api<CloudProfile> = Api::all(client);
                api.get(&args.profile)
                    .await
                    .with_context(|| format!("reading CloudProfile {}", args.profile))?
                    .spec
            }
            Some(ns) => {
                let api: Api<NamespacedCloudProfile> = Api::namespaced(client.clone(), ns);
                let ncp = api.get(&args.profile).await.with_context(|| {
                    format!("reading NamespacedCloudProfile {ns}/{}", args.profile)
                })?;
                if ncp.spec.parent.kind.is_empty() || ncp.spec.parent.kind == KIND_CLOUD_PROFILE {
                    let parents: Api<CloudProfile> = Api::all(client);
                    let parent = parents.get(&ncp.spec.parent.name).await.with_context(|| {
                        format!("reading CloudProfile {}", ncp.spec.parent.name)
                    })?;
                    render::render(&parent.spec, &ncp.spec)
                } else {
                    ncp.status
                        .map(|s| s.cloud_profile_spec)
                        .context("the NamespacedCloudProfile is not rendered yet")?
                }
            }
        };
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"
type: local
machineCapabilities:
  - {name: architecture, values: [amd64, arm64]}
  - {name: hypervisorType, values: [gen2, gen1]}
machineImages:
  - name: ubuntu
    versions:
      - version: 1.0.0
        classification: supported
        capabilityFlavors:
          - {architecture: [amd64], hypervisorType: [gen1]}
      - version: 2.0.0
        classification: preview
        capabilityFlavors:
          - {architecture: [amd64], hypervisorType: [gen1]}
          - {architecture: [amd64], hypervisorType: [gen2, gen1]}
machineTypes:
  - {name: gen2-only, cpu: "2", gpu: "0", memory: 4Gi, architecture: amd64,
     capabilities: {architecture: [amd64], hypervisorType: [gen2]}}
  - {name: any, cpu: "2", gpu: "0", memory: 4Gi, architecture: amd64}
"#;

    fn profile() -> CloudProfileSpec {
        serde_yaml::from_str(PROFILE).unwrap()
    }

    #[test]
    fn only_bootable_versions_are_listed_with_their_flavor() {
        let rows = usable_images(&profile(), "gen2-only").unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].version, "2.0.0");
        assert_eq!(rows[0].classification, "preview");
        let flavor = rows[0].flavor.clone().unwrap().unwrap();
        assert_eq!(flavor["hypervisorType"], ["gen2", "gen1"]);
        let table = images_table(&rows);
        assert!(table.starts_with("IMAGE"), "{table}");
        assert!(
            table.contains("architecture=amd64,hypervisorType=gen2|gen1"),
            "{table}"
        );
    }

    #[test]
    fn a_type_without_capabilities_boots_everything_and_prefers_the_first_values() {
        let rows = usable_images(&profile(), "any").unwrap();
        let versions: Vec<&str> = rows.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(versions, ["1.0.0", "2.0.0"]);
        // gen2 comes first in the definition, so the gen2 flavor wins.
        let flavor = rows[1].flavor.clone().unwrap().unwrap();
        assert!(flavor["hypervisorType"].contains(&"gen2".to_string()));
    }

    #[test]
    fn an_unknown_machine_type_is_an_error() {
        let err = usable_images(&profile(), "nope").unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn render_files_checks_the_parent_and_renders() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("parent.yaml");
        let ncp = dir.path().join("ncp.yaml");
        std::fs::write(
            &parent,
            format!(
                "apiVersion: core.gardener.cloud/v1beta1\nkind: CloudProfile\nmetadata: {{name: local}}\nspec:\n{}",
                PROFILE
                    .lines()
                    .map(|l| format!("  {l}\n"))
                    .collect::<String>()
            ),
        )
        .unwrap();
        std::fs::write(
            &ncp,
            "apiVersion: core.gardener.cloud/v1beta1\nkind: NamespacedCloudProfile\nmetadata: {name: dev, namespace: garden-dev}\nspec:\n  parent: {kind: CloudProfile, name: local}\n  machineTypes:\n    - {name: dev-large, cpu: \"8\", gpu: \"0\", memory: 32Gi}\n",
        )
        .unwrap();
        let out = render_files(&parent, &ncp).unwrap();
        let spec: CloudProfileSpec = serde_yaml::from_str(&out).unwrap();
        let names: Vec<&str> = spec.machine_types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["gen2-only", "any", "dev-large"]);

        std::fs::write(
            &ncp,
            "apiVersion: core.gardener.cloud/v1beta1\nkind: NamespacedCloudProfile\nmetadata: {name: dev, namespace: garden-dev}\nspec:\n  parent: {kind: CloudProfile, name: other}\n",
        )
        .unwrap();
        let err = render_files(&parent, &ncp).unwrap_err().to_string();
        assert!(err.contains("\"other\""), "{err}");
    }
}
