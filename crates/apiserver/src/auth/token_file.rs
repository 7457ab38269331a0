//! The static bearer-token file (`--token-auth-file`), in kube's CSV format:
//! `token,user,uid,"group1,group2"`; the groups column is optional.

use crate::error::{Error, Result};
use std::path::Path;

use super::UserInfo;

/// One line of the token file.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticToken {
    pub token: String,
    pub user: UserInfo,
}

// The token itself never reaches a log.
impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

pub fn load(path: &Path) -> Result<Vec<StaticToken>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::FileReadFailed {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|e| Error::TokenFileInvalid {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// Parses the file's text. Blank lines and `#` comments are skipped.
pub fn parse(text: &str) -> Result<Vec<StaticToken>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let invalid = |why: String| Error::TokenLineInvalid { line: i + 1, why };
        let fields = csv_fields(line).map_err(|why| invalid(why.to_string()))?;
        if fields.len() < 3 {
            return Err(invalid(format!(
                "want token,user,uid[,\"groups\"], got {} fields",
                fields.len()
            )));
        }
        let token = fields[0].clone();
        if token.is_empty() || fields[1].is_empty() {
            return Err(invalid("the token and the user must not be empty".into()));
        }
        if !seen.insert(token.clone()) {
            return Err(invalid("duplicate token".into()));
        }
        let groups = fields
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push(StaticToken {
            token,
            user: UserInfo {
                username: fields[1].clone(),
                uid: fields[2].clone(),
                groups,
                ..Default::default()
            },
        });
    }
    Ok(out)
}

/// Splits one CSV record: fields may be quoted, `""` is a literal quote.
fn csv_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote");
    }
    fields.push(cur);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_format() {
        let t = parse("# comment\nsecret1,alice,u1,\"dev,ops\"\n\nsecret2,bob,u2\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].token, "secret1");
        assert_eq!(t[0].user.username, "alice");
        assert_eq!(t[0].user.uid, "u1");
        assert_eq!(t[0].user.groups, vec!["dev", "ops"]);
        assert!(t[1].user.groups.is_empty());
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse("only,two\n").is_err());
        assert!(parse("t,u,1,\"open\n").is_err());
        assert!(parse("t,u,1\nt,v,2\n").is_err());
        assert!(parse(",u,1\n").is_err());
    }
}
