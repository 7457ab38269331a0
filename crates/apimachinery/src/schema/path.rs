//! Field paths as chains of borrowed segments on the stack, rendered only
//! when a cause or a pruned field is reported.

use std::fmt::Write as _;

#[derive(Clone, Copy)]
enum Seg<'a> {
    Start(&'a str),
    Field(&'a str),
    /// A key of a map (`additionalProperties`).
    Key(&'a str),
    Index(usize),
}

/// A field path kept as a chain of borrowed segments on the stack, rendered
/// only when a cause or a pruned field needs it.
#[derive(Clone, Copy)]
pub(super) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

impl<'a> Path<'a> {
    pub(super) fn start(prefix: &'a str) -> Path<'a> {
        Path {
            parent: None,
            seg: Seg::Start(prefix),
        }
    }
    pub(super) fn field<'b>(&'b self, name: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Field(name),
        }
    }
    pub(super) fn key<'b>(&'b self, name: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Key(name),
        }
    }
    pub(super) fn index(&self, i: usize) -> Path<'_> {
        Path {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

    /// Validation style: `spec.labels[app]`, `spec.containers[0].name`.
    pub(super) fn render(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, false);
        s
    }

    /// Pruning style, as kube-apiserver reports unknown fields: map keys are
    /// joined with dots like any other field.
    pub(super) fn render_dotted(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, true);
        s
    }

    pub(super) fn write(&self, out: &mut String, dotted: bool) {
        if let Some(p) = self.parent {
            p.write(out, dotted);
        }
        match self.seg {
            Seg::Start(p) => out.push_str(p),
            Seg::Field(f) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(f);
            }
            Seg::Key(k) if dotted => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Key(k) => {
                out.push('[');
                out.push_str(k);
                out.push(']');
            }
            Seg::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
}
