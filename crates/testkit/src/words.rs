//! The words of the project's making that a user never reads: the source the
//! project was built from, the tracker's numbers. The list is
//! `data/internal-words.txt`; tests of output, help and explain pages call
//! [`internal_word`] on what a user would see.

const LIST: &str = include_str!("../data/internal-words.txt");

/// The first listed word `text` contains (case-insensitively), if any.
pub fn internal_word(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    LIST.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .find(|w| match w.strip_suffix('#') {
            Some(stem) => lower.match_indices(stem).any(|(i, _)| {
                lower[i + stem.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            }),
            None => lower.contains(w),
        })
}

#[cfg(test)]
mod tests {
    use super::internal_word;

    #[test]
    fn finds_the_listed_words_and_passes_rdma_text() {
        // The listed words are put together here, so this file holds none
        // of them as a string a reader could meet.
        let word = ["SE", "ED"].concat();
        let lower = word.to_lowercase();
        assert_eq!(
            internal_word(&format!("The {word}'s case")),
            Some(lower.as_str())
        );
        let tracker = ["iss", "ue"].concat();
        let listed = format!("{tracker} #");
        let numbered = format!("see {tracker} 19");
        assert_eq!(internal_word(&numbered), Some(listed.as_str()));
        assert_eq!(internal_word(&format!("an {tracker} with the port")), None);
        assert_eq!(internal_word("port 1 ACTIVE, 4X EDR"), None);
    }
}
