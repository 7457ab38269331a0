//! The `labelSelector` query-string syntax (`app=web,tier in (a,b),!canary`):
//! lexer and parser.

use std::fmt;

use super::*;

/// The requirements of a query-string selector, or why it does not parse.
pub(super) fn parse_requirements(input: &str) -> Result<Vec<Requirement>, String> {
    let tokens = lex(input);
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
    };
    parser.parse_selector()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Ident(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Token::Ident(s) => s.as_str(),
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Greater => ">",
            Token::Less => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
        };
        write!(f, "'{s}'")
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | ',' | '(' | ')' | '<' | '>')
}

/// Splits a selector into tokens. Identifiers are maximal runs of characters
/// that are neither whitespace nor operators; `in`/`notin` stay identifiers
/// here and become operators only in operator position, so `k=in` works.
fn lex(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '!' if chars.next_if(|&(_, n)| n == '=').is_some() => Token::NotEquals,
            '!' => Token::Not,
            '=' if chars.next_if(|&(_, n)| n == '=').is_some() => Token::DoubleEquals,
            '=' => Token::Equals,
            '>' => Token::Greater,
            '<' => Token::Less,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            _ => {
                let mut end = start + c.len_utf8();
                while let Some((i, n)) =
                    chars.next_if(|&(_, n)| !n.is_whitespace() && !is_special(n))
                {
                    end = i + n.len_utf8();
                }
                Token::Ident(input.get(start..end).unwrap_or_default().to_string())
            }
        };
        tokens.push(token);
    }
    tokens
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
}

fn describe(token: Option<&Token>) -> String {
    match token {
        Some(t) => t.to_string(),
        None => "end of string".to_string(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    pub(super) fn next(&mut self) -> Option<&Token> {
        let t = self.tokens.get(self.pos);
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn parse_selector(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        if self.peek().is_none() {
            return Ok(requirements);
        }
        loop {
            requirements.push(self.parse_requirement()?);
            match self.next() {
                None => return Ok(requirements),
                Some(Token::Comma) => {
                    if self.peek().is_none() {
                        return Err("found end of string, expected: identifier after ','".into());
                    }
                }
                other => {
                    return Err(format!(
                        "found {}, expected: ',' or end of string",
                        describe(other)
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator, values) = match self.next() {
            Some(Token::Not) => match self.next() {
                Some(Token::Ident(key)) => (key.clone(), Operator::DoesNotExist, Vec::new()),
                other => {
                    return Err(format!(
                        "found {}, expected: identifier after '!'",
                        describe(other)
                    ));
                }
            },
            Some(Token::Ident(key)) => {
                let key = key.clone();
                match self.peek() {
                    None | Some(Token::Comma) => (key, Operator::Exists, Vec::new()),
                    _ => {
                        let operator = self.parse_operator()?;
                        let values = match operator {
                            Operator::In | Operator::NotIn => self.parse_value_list()?,
                            _ => vec![self.parse_exact_value()?],
                        };
                        (key, operator, values)
                    }
                }
            }
            other => {
                return Err(format!(
                    "found {}, expected: '!' or identifier",
                    describe(other)
                ));
            }
        };
        Requirement::new(&key, operator, values)
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        match self.next() {
            Some(Token::Equals | Token::DoubleEquals) => Ok(Operator::Equals),
            Some(Token::NotEquals) => Ok(Operator::NotEquals),
            Some(Token::Greater) => Ok(Operator::GreaterThan),
            Some(Token::Less) => Ok(Operator::LessThan),
            Some(Token::Ident(word)) if word == "in" => Ok(Operator::In),
            Some(Token::Ident(word)) if word == "notin" => Ok(Operator::NotIn),
            other => Err(format!(
                "found {}, expected: '=', '==', '!=', 'in', 'notin', '>' or '<'",
                describe(other)
            )),
        }
    }

    /// The value after `=`, `==`, `!=`, `>`, `<`; nothing before `,` or the
    /// end means the empty value (`k=`).
    fn parse_exact_value(&mut self) -> Result<String, String> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            Some(Token::Ident(v)) => {
                let v = v.clone();
                self.pos += 1;
                Ok(v)
            }
            other => Err(format!(
                "found {}, expected: identifier or ','",
                describe(other)
            )),
        }
    }

    /// `(a, b, ...)`. As in kube, an item left blank between commas is the
    /// empty value (`(a,)` holds `a` and `""`), while `()` holds nothing.
    fn parse_value_list(&mut self) -> Result<Vec<String>, String> {
        match self.next() {
            Some(Token::Open) => {}
            other => return Err(format!("found {}, expected: '('", describe(other))),
        }
        let mut values = Vec::new();
        let mut current: Option<String> = None;
        let mut saw_comma = false;
        loop {
            match self.next() {
                Some(Token::Ident(v)) => {
                    if current.is_some() {
                        return Err(format!("found '{v}', expected: ',' or ')'"));
                    }
                    current = Some(v.clone());
                }
                Some(Token::Comma) => {
                    saw_comma = true;
                    values.push(current.take().unwrap_or_default());
                }
                Some(Token::Close) => {
                    if current.is_some() || saw_comma {
                        values.push(current.take().unwrap_or_default());
                    }
                    return Ok(values);
                }
                None => return Err("found end of string, expected: ')'".into()),
                Some(other) => {
                    return Err(format!("found {other}, expected: identifier, ',' or ')'"));
                }
            }
        }
    }
}
