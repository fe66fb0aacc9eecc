//! Paragraphs wrapped for reading in a terminal or a diff, as the rest of the repository's
//! Markdown is.

/// The width the report's paragraphs are wrapped to.
pub const WIDTH: usize = 100;

/// `text` wrapped greedily at spaces into lines of at most `width` characters. A code span
/// (between backticks) is kept on one line; a word or code span longer than `width` gets a line of
/// its own. Runs of whitespace, newlines included, count as one space.
pub fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for token in tokens(text) {
        let needed = line.chars().count() + 1 + token.chars().count();
        if !line.is_empty() && needed > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&token);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.join("\n")
}

/// The words of `text`, a code span and the words it touches joined into one token.
fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for word in text.split_whitespace() {
        match out.last_mut() {
            Some(last) if open => {
                last.push(' ');
                last.push_str(word);
            }
            _ => out.push(word.to_string()),
        }
        if word.matches('`').count() % 2 == 1 {
            open = !open;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_stay_within_the_width_and_keep_every_word() {
        let text = "kcache brings client-go's tools/cache to Rust. ".repeat(12);
        let wrapped = wrap(&text, 40);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 40),
            "{wrapped}"
        );
        assert!(wrapped.lines().count() > 10);
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
    }

    #[test]
    fn code_spans_are_not_broken_and_long_words_stand_alone() {
        let text = "run `cargo run --release -p kcache-benches` now, then read it";
        let wrapped = wrap(text, 30);
        assert!(
            wrapped
                .lines()
                .any(|l| l == "`cargo run --release -p kcache-benches`"),
            "{wrapped}"
        );
        assert_eq!(wrap("a\n\nb   c", 100), "a b c");
    }
}
