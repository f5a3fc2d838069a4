//! Which pairs meet in which round: rounds of disjoint pairs, so every pair
//! of a round can be measured at once without one agent running two tests.
//!
//! Pure functions over node indices `0..n`; pairs are `(a, b)` with `a < b`.

/// One round: disjoint pairs `(a, b)`, `a < b`.
pub type Round = Vec<(usize, usize)>;

/// Every pair of `n` nodes, in rounds of disjoint pairs — the circle method
/// (round-robin tournament): node 0 stays put while the others rotate one
/// place per round. `n` even: `n - 1` rounds of `n / 2` pairs. `n` odd: a
/// phantom node makes it even and whoever meets it sits the round out (a
/// bye), so `n` rounds of `(n - 1) / 2` pairs, each node idle exactly once.
/// `n < 2`: no rounds.
pub fn circle(n: usize) -> Vec<Round> {
    if n < 2 {
        return Vec::new();
    }
    let m = n + n % 2; // with the phantom `n` when odd
    let mut rounds = Vec::with_capacity(m - 1);
    for r in 0..m - 1 {
        // Seats 1..m hold the rotating nodes 1..m, shifted by r.
        let seat = |i: usize| if i == 0 { 0 } else { 1 + (i - 1 + r) % (m - 1) };
        let mut round = Vec::with_capacity(m / 2);
        for i in 0..m / 2 {
            let (a, b) = (seat(i), seat(m - 1 - i));
            if a < n && b < n {
                round.push((a.min(b), a.max(b)));
            }
        }
        round.sort_unstable();
        rounds.push(round);
    }
    rounds
}

/// A ring: each node meets its two neighbours (`i` and `i + 1 mod n`), in
/// as few rounds of disjoint pairs as a ring allows — 2 for even `n`, 3 for
/// odd `n` (an odd cycle needs a third). What `--quick` screens with: `n`
/// pairs instead of `n (n - 1) / 2`. `n == 2`: the one pair; `n < 2`: none.
pub fn ring(n: usize) -> Vec<Round> {
    match n {
        0 | 1 => return Vec::new(),
        2 => return vec![vec![(0, 1)]],
        _ => {}
    }
    let edge = |i: usize| {
        let j = (i + 1) % n;
        (i.min(j), i.max(j))
    };
    let mut rounds = vec![
        (0..n - 1).step_by(2).map(edge).collect::<Round>(),
        (1..n - 1).step_by(2).map(edge).collect::<Round>(),
    ];
    if n % 2 == 1 {
        // An odd cycle: the wrap edge meets node 0, busy in round one, and
        // node n-1, busy in round two.
        rounds.push(vec![edge(n - 1)]);
    } else {
        // Edge n-1 (the wrap) joins the second round: n-1 is odd.
        rounds[1].push(edge(n - 1));
    }
    for r in &mut rounds {
        r.sort_unstable();
    }
    rounds
}

/// Packs `pairs` into rounds of disjoint pairs, greedily in the order
/// given (each pair goes to the first round where neither node is busy).
/// Used for confirmation measurements, whose pairs are arbitrary.
pub fn pack(pairs: &[(usize, usize)]) -> Vec<Round> {
    let mut rounds: Vec<(Round, Vec<usize>)> = Vec::new();
    for &(a, b) in pairs {
        let p = (a.min(b), a.max(b));
        match rounds
            .iter_mut()
            .find(|(_, busy)| !busy.contains(&a) && !busy.contains(&b))
        {
            Some((round, busy)) => {
                round.push(p);
                busy.extend([a, b]);
            }
            None => rounds.push((vec![p], vec![a, b])),
        }
    }
    rounds.into_iter().map(|(r, _)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn disjoint(r: &Round) -> bool {
        let mut seen = HashSet::new();
        r.iter()
            .all(|&(a, b)| a < b && seen.insert(a) && seen.insert(b))
    }

    #[test]
    fn six_nodes_five_rounds_of_three() {
        let r = circle(6);
        assert_eq!(r.len(), 5);
        assert!(r.iter().all(|x| x.len() == 3 && disjoint(x)));
        // Round 0 of the circle method: 0-5, 1-4, 2-3.
        assert_eq!(r[0], vec![(0, 5), (1, 4), (2, 3)]);
        let all: HashSet<_> = r.iter().flatten().copied().collect();
        assert_eq!(all.len(), 15);
    }

    #[test]
    fn odd_n_gives_each_node_one_bye() {
        let r = circle(5);
        assert_eq!(r.len(), 5);
        for node in 0..5 {
            let idle = r
                .iter()
                .filter(|x| !x.iter().any(|&(a, b)| a == node || b == node))
                .count();
            assert_eq!(idle, 1, "node {node}");
        }
        assert!(r.iter().all(|x| x.len() == 2));
    }

    #[test]
    fn tiny_cases() {
        assert!(circle(0).is_empty() && circle(1).is_empty());
        assert_eq!(circle(2), vec![vec![(0, 1)]]);
        assert_eq!(circle(3).len(), 3);
        assert!(ring(1).is_empty());
        assert_eq!(ring(2), vec![vec![(0, 1)]]);
        assert_eq!(ring(3), vec![vec![(0, 1)], vec![(1, 2)], vec![(0, 2)]]);
        assert_eq!(ring(4), vec![vec![(0, 1), (2, 3)], vec![(0, 3), (1, 2)]]);
    }

    #[test]
    fn pack_keeps_rounds_disjoint_in_order() {
        let r = pack(&[(0, 1), (1, 2), (3, 4), (0, 2), (5, 0)]);
        assert_eq!(
            r,
            vec![vec![(0, 1), (3, 4)], vec![(1, 2), (0, 5)], vec![(0, 2)]]
        );
        assert!(r.iter().all(disjoint));
    }

    proptest! {
        #[test]
        fn circle_covers_every_pair_once(n in 2usize..64) {
            let r = circle(n);
            let m = n + n % 2;
            prop_assert_eq!(r.len(), m - 1);
            let mut seen = HashSet::new();
            for round in &r {
                prop_assert!(disjoint(round));
                prop_assert_eq!(round.len(), n / 2);
                for &p in round {
                    prop_assert!(p.1 < n);
                    prop_assert!(seen.insert(p), "pair {:?} twice", p);
                }
            }
            prop_assert_eq!(seen.len(), n * (n - 1) / 2);
        }

        #[test]
        fn ring_covers_each_neighbour_pair_once(n in 3usize..64) {
            let r = ring(n);
            prop_assert_eq!(r.len(), if n % 2 == 0 { 2 } else { 3 });
            let got: Vec<_> = r.iter().flatten().copied().collect();
            prop_assert!(r.iter().all(disjoint));
            let want: HashSet<_> = (0..n).map(|i| {
                let j = (i + 1) % n;
                (i.min(j), i.max(j))
            }).collect();
            prop_assert_eq!(got.len(), n);
            prop_assert_eq!(got.into_iter().collect::<HashSet<_>>(), want);
        }
    }
}
