//! MSL → C++ for the simulator, on preprocessed source (macros expanded, line markers kept), so
//! that g++ compiles kernels with their signatures unchanged and its errors point into the
//! `.metal` files:
//! - `kernel void f(...)` loses `kernel`; each parameter's attribute becomes a default argument
//!   that reads the current simulated thread (`[[buffer(n)]]`, `[[thread_position_in_grid]]`, …),
//!   and the kernel is registered in `msl_sim_kernels` so the runtime can call `f()`.
//! - `threadgroup T name[N];` in a function body becomes a reference to the threadgroup's copy.
//! - the address spaces `device`, `thread` and `threadgroup` vanish; `constant` becomes `const`.
//! - other attributes vanish; half literals (`1.0h`) become `half` casts.
//!
//! Every rewrite keeps the line count, so line markers stay right.

use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Space,
    Ident,
    Number,
    Literal,
    Punct,
    /// A preprocessor line (line markers after `g++ -E`).
    Directive,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
}

fn tokenize(source: &str) -> Vec<Token<'_>> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        let kind = if c == b'#' && line_start {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            Kind::Directive
        } else if c.is_ascii_whitespace() {
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            Kind::Space
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            Kind::Space
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                i += 1;
            }
            i = (i + 2).min(bytes.len());
            Kind::Space
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            Kind::Ident
        } else if c.is_ascii_digit()
            || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            // A pp-number: digits, letters, dots, and signs after an exponent letter.
            i += 1;
            while i < bytes.len() {
                let b = bytes[i];
                let exponent_sign = (b == b'+' || b == b'-')
                    && matches!(bytes[i - 1], b'e' | b'E' | b'p' | b'P')
                    && !source[start..i].starts_with("0x");
                if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            Kind::Number
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != c {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
            Kind::Literal
        } else {
            i += 1;
            Kind::Punct
        };
        let text = &source[start..i];
        line_start = match kind {
            Kind::Space => line_start || text.contains('\n'),
            Kind::Directive => true,
            _ => false,
        };
        tokens.push(Token { kind, text });
    }
    tokens
}

#[derive(Debug)]
pub struct RewriteError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for RewriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} of the preprocessed source: {}",
            self.line, self.message
        )
    }
}

/// The rewritten C++ and the kernels it registers.
pub struct Rewritten {
    pub cpp: String,
    pub kernels: Vec<String>,
}

/// Parameter attributes that bind to a value of the current thread.
const THREAD_ATTRIBUTES: &[&str] = &[
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threadgroups_per_grid",
    "threads_per_grid",
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "simdgroups_per_threadgroup",
    "threads_per_simdgroup",
    "thread_execution_width",
];

const ERASED_ADDRESS_SPACES: &[&str] = &["device", "thread", "threadgroup"];

struct Rewriter<'a> {
    tokens: Vec<Token<'a>>,
    out: String,
    kernels: Vec<String>,
    threadgroup_sites: u32,
}

impl<'a> Rewriter<'a> {
    fn significant(&self, i: usize) -> bool {
        !matches!(self.tokens[i].kind, Kind::Space | Kind::Directive)
    }

    /// The index of the next significant token at or after `i`.
    fn next(&self, mut i: usize) -> usize {
        while i < self.tokens.len() && !self.significant(i) {
            i += 1;
        }
        i
    }

    fn text(&self, i: usize) -> &'a str {
        self.tokens.get(i).map_or("", |t| t.text)
    }

    fn line_of(&self, i: usize) -> usize {
        1 + self.tokens[..i.min(self.tokens.len())]
            .iter()
            .map(|t| t.text.matches('\n').count())
            .sum::<usize>()
    }

    fn error(&self, i: usize, message: impl Into<String>) -> RewriteError {
        RewriteError {
            line: self.line_of(i),
            message: message.into(),
        }
    }

    /// Whether `[[` starts at i (two adjacent `[` tokens).
    fn attribute_at(&self, i: usize) -> bool {
        self.text(i) == "[" && self.text(i + 1) == "["
    }

    /// The end (exclusive) of the attribute `[[ … ]]` starting at i.
    fn attribute_end(&self, i: usize) -> Result<usize, RewriteError> {
        let mut depth = 0i32;
        let mut j = i;
        while j < self.tokens.len() {
            match self.text(j) {
                "[" => depth += 1,
                "]" => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(j + 1);
                    }
                }
                _ => {}
            }
            j += 1;
        }
        Err(self.error(i, "unterminated attribute"))
    }

    /// The closing bracket matching the opening one at i.
    fn matching(&self, i: usize, open: &str, close: &str) -> Result<usize, RewriteError> {
        let mut depth = 0i32;
        for j in i..self.tokens.len() {
            if self.text(j) == open {
                depth += 1;
            } else if self.text(j) == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
        }
        Err(self.error(i, format!("no matching {close}")))
    }

    /// The newlines in tokens a..b, so a rewrite that drops them keeps the line count.
    fn newlines(&self, a: usize, b: usize) -> String {
        "\n".repeat(
            self.tokens[a..b]
                .iter()
                .map(|t| t.text.matches('\n').count())
                .sum(),
        )
    }

    /// Plain text of tokens a..b with address spaces erased and `constant` made `const`.
    fn type_text(&self, a: usize, b: usize) -> String {
        let mut out = String::new();
        for j in a..b {
            let t = self.tokens[j];
            match t.kind {
                Kind::Space | Kind::Directive => out.push(' '),
                Kind::Ident if ERASED_ADDRESS_SPACES.contains(&t.text) => {}
                Kind::Ident if t.text == "constant" => {
                    if !self.const_neighbour(j) {
                        out.push_str("const");
                    }
                }
                _ => out.push_str(t.text),
            }
        }
        out.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn const_neighbour(&self, j: usize) -> bool {
        let next = self.next(j + 1);
        let prev = (0..j).rev().find(|&k| self.significant(k));
        self.text(next) == "const" || prev.is_some_and(|k| self.text(k) == "const")
    }

    fn run(mut self) -> Result<Rewritten, RewriteError> {
        let mut depth = 0usize;
        let mut last_significant = "";
        let mut i = 0;
        while i < self.tokens.len() {
            let t = self.tokens[i];
            if !self.significant(i) {
                self.out.push_str(t.text);
                i += 1;
                continue;
            }
            let at_statement_start = depth > 0 && matches!(last_significant, "{" | "}" | ";");
            if self.attribute_at(i) {
                let end = self.attribute_end(i)?;
                let after = self.next(end);
                if depth == 0 && self.text(i + 2) == "kernel" && self.text(after) == "void" {
                    let nl = self.newlines(i, after);
                    self.out.push_str(&nl);
                    i = self.kernel(after)?;
                } else {
                    let nl = self.newlines(i, end);
                    self.out.push_str(&nl);
                    i = end;
                }
                last_significant = "]";
                continue;
            }
            match (t.kind, t.text) {
                (Kind::Ident, "kernel") if depth == 0 && self.text(self.next(i + 1)) == "void" => {
                    let after = self.next(i + 1);
                    let nl = self.newlines(i, after);
                    self.out.push_str(&nl);
                    i = self.kernel(after)?;
                    last_significant = "}";
                    continue;
                }
                (Kind::Ident, "threadgroup") if at_statement_start => {
                    i = self.threadgroup_declaration(i)?;
                    last_significant = ";";
                    continue;
                }
                (Kind::Ident, s) if ERASED_ADDRESS_SPACES.contains(&s) => {}
                (Kind::Ident, "constant") => {
                    if !self.const_neighbour(i) {
                        self.out.push_str("const");
                    }
                }
                (Kind::Number, s) if is_half_literal(s) => {
                    let _ = write!(self.out, "((half){}f)", &s[..s.len() - 1]);
                }
                (Kind::Punct, "{") => {
                    depth += 1;
                    self.out.push('{');
                }
                (Kind::Punct, "}") => {
                    depth = depth.saturating_sub(1);
                    self.out.push('}');
                }
                _ => self.out.push_str(t.text),
            }
            last_significant = t.text;
            i += 1;
        }
        self.out
            .push_str("\nextern \"C\" const msl_sim_kernel msl_sim_kernels[] = {\n");
        for name in &self.kernels {
            let _ = writeln!(self.out, "    {{\"{name}\", [] {{ {name}(); }}}},");
        }
        self.out.push_str("    {nullptr, nullptr},\n};\n");
        Ok(Rewritten {
            cpp: self.out,
            kernels: self.kernels,
        })
    }

    /// `void name(params) {` with `void` at i: emits the declaration with bound parameters and
    /// returns the index after the closing parenthesis.
    fn kernel(&mut self, void_at: usize) -> Result<usize, RewriteError> {
        let name_at = self.next(void_at + 1);
        let open = self.next(name_at + 1);
        if self.tokens.get(name_at).map(|t| t.kind) != Some(Kind::Ident) || self.text(open) != "(" {
            return Err(self.error(void_at, "a kernel must be `kernel void name(...)`"));
        }
        let name = self.text(name_at).to_string();
        let close = self.matching(open, "(", ")")?;
        let _ = write!(self.out, "void {name}(");
        let mut start = open + 1;
        let mut depth = 0i32;
        let mut params = Vec::new();
        for j in open + 1..close {
            match self.text(j) {
                "(" | "[" | "<" => depth += 1,
                ")" | "]" | ">" => depth -= 1,
                "," if depth == 0 => {
                    params.push((start, j));
                    start = j + 1;
                }
                _ => {}
            }
        }
        if self.next(start) < close {
            params.push((start, close));
        }
        for (k, &(a, b)) in params.iter().enumerate() {
            if k > 0 {
                self.out.push(',');
            }
            let param = self.parameter(a, b)?;
            self.out.push_str(&param);
        }
        self.out.push(')');
        self.kernels.push(name);
        Ok(close + 1)
    }

    /// One kernel parameter `type name [[attribute]]` as `type name = binding`.
    fn parameter(&self, a: usize, b: usize) -> Result<String, RewriteError> {
        let attr = (a..b)
            .find(|&j| self.attribute_at(j))
            .ok_or_else(|| self.error(a, "a kernel parameter without an attribute"))?;
        let attr_end = self.attribute_end(attr)?;
        let name_at = (a..attr)
            .rev()
            .find(|&j| self.significant(j))
            .filter(|&j| self.tokens[j].kind == Kind::Ident)
            .ok_or_else(|| self.error(a, "a kernel parameter without a name"))?;
        let ty = self.type_text(a, name_at);
        let name = self.text(name_at);
        let inner: Vec<&str> = (attr + 2..attr_end - 2)
            .filter(|&j| self.significant(j))
            .map(|j| self.text(j))
            .collect();
        let binding = match inner.as_slice() {
            ["buffer", "(", index, ")"] => {
                format!("::msl_sim::bind_buffer<{ty}>({index})")
            }
            [attribute] if THREAD_ATTRIBUTES.contains(attribute) => {
                format!("::msl_sim::bind<{ty}>(::msl_sim::attribute::{attribute})")
            }
            other => {
                return Err(self.error(
                    attr,
                    format!(
                        "the simulator does not bind the attribute [[{}]]",
                        other.join("")
                    ),
                ))
            }
        };
        Ok(format!("{}{ty} {name} = {binding}", self.newlines(a, b)))
    }

    /// `threadgroup T name[dims];` at i: a reference to this threadgroup's copy.
    fn threadgroup_declaration(&mut self, at: usize) -> Result<usize, RewriteError> {
        let semicolon = (at..self.tokens.len())
            .find(|&j| self.text(j) == ";")
            .ok_or_else(|| self.error(at, "a threadgroup declaration without `;`"))?;
        let dims_at = (at..semicolon)
            .find(|&j| self.text(j) == "[" || self.text(j) == "=")
            .unwrap_or(semicolon);
        if self.text(dims_at) == "=" || (at..semicolon).any(|j| self.text(j) == ",") {
            return Err(self.error(
                at,
                "threadgroup declarations take one variable and no initializer",
            ));
        }
        let name_at = (at + 1..dims_at)
            .rev()
            .find(|&j| self.significant(j))
            .filter(|&j| self.tokens[j].kind == Kind::Ident)
            .ok_or_else(|| self.error(at, "a threadgroup declaration without a name"))?;
        let ty = self.type_text(at + 1, name_at);
        let dims = self.type_text(dims_at, semicolon);
        let site = self.threadgroup_sites;
        self.threadgroup_sites += 1;
        let _ = write!(
            self.out,
            "auto& {} = ::msl_sim::threadgroup_variable<{ty}{dims}>({site});{}",
            self.text(name_at),
            self.newlines(at, semicolon)
        );
        Ok(semicolon + 1)
    }
}

fn is_half_literal(number: &str) -> bool {
    let lower = number.to_ascii_lowercase();
    !lower.starts_with("0x") && lower.ends_with('h') && lower.len() > 1
}

/// Rewrites preprocessed MSL into C++ for `metal_stdlib.hpp`.
pub fn rewrite(preprocessed: &str) -> Result<Rewritten, RewriteError> {
    Rewriter {
        tokens: tokenize(preprocessed),
        out: String::with_capacity(preprocessed.len() + 1024),
        kernels: Vec::new(),
        threadgroup_sites: 0,
    }
    .run()
}

/// The member declarations of every swizzle of `n` components (2 to 4 letters from xyzw and
/// rgba), for `#include` inside the vector unions of metal_stdlib.hpp.
pub fn swizzles(n: usize) -> String {
    let mut out = String::new();
    for letters in [b"xyzw", b"rgba"] {
        for len in 2..=4 {
            let mut index = vec![0usize; len];
            loop {
                let name: String = index.iter().map(|&k| letters[k] as char).collect();
                let components: Vec<String> = index.iter().map(|k| k.to_string()).collect();
                let _ = writeln!(out, "swizzle<T, S, {}> {name};", components.join(", "));
                // Next index tuple in base n.
                let mut pos = len;
                loop {
                    if pos == 0 {
                        break;
                    }
                    pos -= 1;
                    index[pos] += 1;
                    if index[pos] < n {
                        break;
                    }
                    index[pos] = 0;
                }
                if index.iter().all(|&k| k == 0) {
                    break;
                }
            }
        }
    }
    out
}
