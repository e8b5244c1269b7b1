//! The generated text on its way to the client, piece by piece: cut at the first stop string,
//! and split into reasoning (inside `<think>…</think>`) and answer. Both hold back a tail that
//! might be the start of what they look for, so a streamed reply equals the whole reply.

use crate::chat::{THINK, THINK_END};

/// Cuts the text at the first occurrence of any stop string (which is not passed on).
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
    stopped: bool,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher {
            stops,
            pending: String::new(),
            stopped: false,
        }
    }

    /// The text that is certainly before any stop string, and whether one was found.
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        if self.stopped {
            return (String::new(), true);
        }
        self.pending.push_str(piece);
        let first = self
            .stops
            .iter()
            .filter_map(|stop| self.pending.find(stop.as_str()))
            .min();
        if let Some(at) = first {
            self.pending.truncate(at);
            self.stopped = true;
            return (std::mem::take(&mut self.pending), true);
        }
        let keep = self
            .stops
            .iter()
            .map(|stop| longest_suffix_prefix(&self.pending, stop))
            .max()
            .unwrap_or(0);
        let emit = self.pending.len() - keep;
        let rest = self.pending.split_off(emit);
        (std::mem::replace(&mut self.pending, rest), false)
    }

    /// What is held back at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `pattern`, on
/// character boundaries.
fn longest_suffix_prefix(text: &str, pattern: &str) -> usize {
    (1..pattern.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && pattern.is_char_boundary(n)
                && text.ends_with(&pattern[..n])
        })
        .unwrap_or(0)
}

/// Text of a reply, sorted into reasoning and answer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Split {
    pub reasoning: String,
    pub content: String,
}

impl Split {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// At the start of a reply that might open with `<think>`.
    Start,
    Reasoning,
    /// Just past `</think>`: newlines before the answer are dropped.
    AnswerStart,
    Answer,
}

/// Splits a reply into reasoning and answer as it streams. `in_reasoning`: the prompt already
/// opened the reasoning block (a generation prompt ending in `<think>\n`).
pub struct ReasoningSplitter {
    phase: Phase,
    pending: String,
    reasoning_started: bool,
}

impl ReasoningSplitter {
    pub fn new(in_reasoning: bool) -> ReasoningSplitter {
        ReasoningSplitter {
            phase: if in_reasoning {
                Phase::Reasoning
            } else {
                Phase::Start
            },
            pending: String::new(),
            reasoning_started: false,
        }
    }

    /// A splitter that passes everything on as answer (plain completions).
    pub fn answer_only() -> ReasoningSplitter {
        ReasoningSplitter {
            phase: Phase::Answer,
            pending: String::new(),
            reasoning_started: false,
        }
    }

    pub fn push(&mut self, piece: &str) -> Split {
        self.pending.push_str(piece);
        let mut out = Split::default();
        loop {
            match self.phase {
                Phase::Start => {
                    let trimmed = self.pending.trim_start_matches('\n');
                    if let Some(thought) = trimmed.strip_prefix(THINK) {
                        self.pending = thought.to_owned();
                        self.phase = Phase::Reasoning;
                    } else if THINK.starts_with(trimmed) {
                        return out;
                    } else {
                        self.phase = Phase::Answer;
                    }
                }
                Phase::Reasoning => {
                    if !self.reasoning_started {
                        // Newlines after `<think>` are not part of the reasoning.
                        self.pending = self.pending.trim_start_matches('\n').to_owned();
                        if self.pending.is_empty() {
                            return out;
                        }
                        self.reasoning_started = true;
                    }
                    if let Some(at) = self.pending.find(THINK_END) {
                        out.reasoning.push_str(&self.pending[..at]);
                        self.pending.drain(..at + THINK_END.len());
                        self.phase = Phase::AnswerStart;
                        continue;
                    }
                    let keep = longest_suffix_prefix(&self.pending, THINK_END);
                    let rest = self.pending.split_off(self.pending.len() - keep);
                    out.reasoning
                        .push_str(&std::mem::replace(&mut self.pending, rest));
                    return out;
                }
                Phase::AnswerStart => {
                    let trimmed = self.pending.trim_start_matches('\n');
                    if trimmed.is_empty() {
                        self.pending.clear();
                        return out;
                    }
                    self.pending = trimmed.to_owned();
                    self.phase = Phase::Answer;
                }
                Phase::Answer => {
                    out.content.push_str(&std::mem::take(&mut self.pending));
                    return out;
                }
            }
        }
    }

    /// What is held back at the end of the reply.
    pub fn finish(&mut self) -> Split {
        let rest = std::mem::take(&mut self.pending);
        match self.phase {
            Phase::Reasoning => Split {
                reasoning: rest,
                content: String::new(),
            },
            Phase::AnswerStart => Split::default(),
            Phase::Start | Phase::Answer => Split {
                reasoning: String::new(),
                content: rest,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of every size and checks each gives the same result as one piece.
    fn stop_in_pieces(text: &str, stops: &[&str]) -> (String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let whole = {
            let mut m = StopMatcher::new(stops.clone());
            let (mut out, hit) = m.push(text);
            out.push_str(&m.finish());
            (out, hit)
        };
        for size in 1..=text.len().max(1) {
            let mut m = StopMatcher::new(stops.clone());
            let (mut out, mut hit) = (String::new(), false);
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(size) {
                let (emitted, h) = m.push(&chunk.iter().collect::<String>());
                out.push_str(&emitted);
                hit |= h;
            }
            out.push_str(&m.finish());
            assert_eq!((out, hit), whole, "piece size {size}");
        }
        whole
    }

    #[test]
    fn stops_cut_at_the_first_match_in_any_pieces() {
        assert_eq!(
            stop_in_pieces("one two. three", &["."]),
            ("one two".into(), true)
        );
        assert_eq!(
            stop_in_pieces("abcabd", &["abd", "ca"]),
            ("ab".into(), true)
        );
        assert_eq!(stop_in_pieces("ab", &["abc"]), ("ab".into(), false));
        assert_eq!(
            stop_in_pieces("é ende", &["ende", "é e"]),
            ("".into(), true)
        );
    }

    fn split_in_pieces(text: &str, in_reasoning: bool) -> Split {
        let mut result = None;
        for size in 1..=text.len().max(1) {
            let mut s = ReasoningSplitter::new(in_reasoning);
            let mut total = Split::default();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(size).map(|c| c.iter().collect::<String>()) {
                let part = s.push(&chunk);
                total.reasoning.push_str(&part.reasoning);
                total.content.push_str(&part.content);
            }
            let part = s.finish();
            total.reasoning.push_str(&part.reasoning);
            total.content.push_str(&part.content);
            if let Some(first) = &result {
                assert_eq!(&total, first, "piece size {size}");
            }
            result = Some(total);
        }
        result.unwrap()
    }

    #[test]
    fn reasoning_is_told_from_the_answer_in_any_pieces() {
        let split = |reasoning: &str, content: &str| Split {
            reasoning: reasoning.into(),
            content: content.into(),
        };
        assert_eq!(
            split_in_pieces("\nweigh it\n</think>\n\nFour.", true),
            split("weigh it\n", "Four.")
        );
        assert_eq!(
            split_in_pieces("<think>\nhmm</think>\n\nYes", false),
            split("hmm", "Yes")
        );
        assert_eq!(
            split_in_pieces("Just <think> text", false),
            split("", "Just <think> text")
        );
        assert_eq!(
            split_in_pieces("cut off in thou", true),
            split("cut off in thou", "")
        );
        assert_eq!(split_in_pieces("<thi", false), split("", "<thi"));
    }
}
