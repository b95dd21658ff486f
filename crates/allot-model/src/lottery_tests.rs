use super::*;
use crate::pass::stride;

/// The draw over 2^20 evenly spread inputs: mean 1, and the tail of exp(-x).
#[test]
fn the_draw_is_exponential_with_mean_one() {
    let n = 1u64 << 20;
    let draws: Vec<u64> = (0..n).map(|i| exp_draw((i << 12) as u32 + 2048)).collect();
    let mean = draws.iter().sum::<u64>() as f64 / n as f64 / ONE as f64;
    let above = |x: f64| draws.iter().filter(|d| **d as f64 > x * ONE as f64).count() as f64 / n as f64;
    eprintln!("mean {mean:.5}; above 1: {:.5} (e^-1 0.36788); above 3: {:.5} (e^-3 0.04979)", above(1.0), above(3.0));
    assert!((mean - 1.0).abs() < 0.003, "mean {mean}");
    assert!((above(1.0) - (-1f64).exp()).abs() < 0.002, "P(X > 1) = {}", above(1.0));
    assert!((above(3.0) - (-3f64).exp()).abs() < 0.001, "P(X > 3) = {}", above(3.0));
    assert_eq!(exp_draw(u32::MAX), 0, "U = 1: -ln 1");
    assert_eq!(exp_draw(0), 22_713, "U = 2^-32: 32 ln 2");
    assert_eq!(exp_draw((1 << 31) - 1), 709, "U = 1/2: ln 2 (0.6931 x 1024 = 709.8, truncated)");
    assert_eq!(charge(u64::MAX, 0), u64::MAX / ONE, "saturates, never wraps");
}

/// xorshift64: the tests' random bits.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
}

/// How a turn is charged.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// stride scheduling: the stride of the time used
    Stride,
    /// the lottery mode: that times the draw
    Lottery,
    /// the lottery mode without compensation: a whole quantum's stride times the draw,
    /// whatever part of it was used
    NoCompensation,
}

const QUANTUM: u64 = 20_000_000;

/// `turns` turns on one CPU among clients of `shares`, each of which uses `used[i]` of
/// each turn and is at once runnable again; the lowest pass runs. The client of each turn,
/// and each client's CPU time.
fn race(shares: &[u64], used: &[u64], mode: Mode, turns: usize) -> (Vec<usize>, Vec<u64>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pass = vec![0u64; shares.len()];
    let (mut order, mut cpu) = (Vec::with_capacity(turns), vec![0u64; shares.len()]);
    for _ in 0..turns {
        let i = (0..shares.len()).min_by_key(|i| pass[*i]).unwrap();
        order.push(i);
        cpu[i] += used[i];
        let charged = match mode {
            Mode::Stride => used[i],
            Mode::Lottery => charge(used[i], rng.next()),
            Mode::NoCompensation => charge(QUANTUM, rng.next()),
        };
        pass[i] += stride(charged, shares[i]);
    }
    (order, cpu)
}

/// The fraction of turns client 0 won in each window of `w` turns: their mean and
/// standard deviation.
fn spread(order: &[usize], w: usize) -> (f64, f64) {
    let f: Vec<f64> = order.chunks_exact(w).map(|c| c.iter().filter(|i| **i == 0).count() as f64 / w as f64).collect();
    let mean = f.iter().sum::<f64>() / f.len() as f64;
    (mean, (f.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / f.len() as f64).sqrt())
}

/// Tickets 3:2:1, hogs: in the lottery mode each turn is a draw, independent of the turns
/// before it: client 0 wins half the turns, half of those after its own, and its wins in a
/// second (50 turns of 20 ms) spread as a binomial's, sqrt(0.5 x 0.5 / 50) = 0.0707.
/// Stride scheduling gives the same half with no spread to speak of.
#[test]
fn each_turn_of_the_lottery_mode_is_a_draw_by_tickets() {
    let shares = [30_000, 20_000, 10_000];
    let turns = 300_000;
    let (order, _) = race(&shares, &[QUANTUM; 3], Mode::Lottery, turns);
    let won = |c: usize| order.iter().filter(|i| **i == c).count() as f64 / turns as f64;
    let after_own =
        order.windows(2).filter(|w| w[0] == 0 && w[1] == 0).count() as f64 / order[..turns - 1].iter().filter(|i| **i == 0).count() as f64;
    let (mean, sd) = spread(&order, 50);
    eprintln!(
        "lottery: turns won {:.4} {:.4} {:.4}; client 0 after its own turn {after_own:.4}; per 50 turns {mean:.4} sd {sd:.4}",
        won(0),
        won(1),
        won(2)
    );
    for (c, want) in [(0, 0.5), (1, 1.0 / 3.0), (2, 1.0 / 6.0)] {
        assert!((won(c) - want).abs() < 0.005, "client {c} won {:.4} of the turns, want {want:.4}", won(c));
    }
    assert!((after_own - 0.5).abs() < 0.01, "after its own turn client 0 won {after_own:.4}: the turns are not independent draws");
    assert!((sd - 0.0707).abs() < 0.007, "client 0's wins per 50 turns spread {sd:.4}, a binomial's 0.0707");
    let (order, _) = race(&shares, &[QUANTUM; 3], Mode::Stride, turns);
    let (smean, ssd) = spread(&order, 50);
    let s_after = order.windows(2).filter(|w| w[0] == 0 && w[1] == 0).count() as f64 / order.iter().filter(|i| **i == 0).count() as f64;
    eprintln!("stride: client 0 after its own turn {s_after:.4}; per 50 turns {smean:.4} sd {ssd:.4}");
    assert!((smean - 0.5).abs() < 0.005 && ssd < 0.02, "stride: per 50 turns {smean:.4} sd {ssd:.4}");
}

/// Compensation tickets (Petrou et al. 1999 §2.2): a client that yields after a fifth of
/// its quantum and is runnable again at once gets its share of the CPU in the lottery
/// mode, as one that uses its whole quantum does; charged a whole quantum per turn, it
/// would win half the turns and get a sixth of the CPU.
#[test]
fn a_client_that_yields_early_is_compensated() {
    let used = [QUANTUM / 5, QUANTUM];
    for mode in [Mode::Lottery, Mode::Stride, Mode::NoCompensation] {
        let (_, cpu) = race(&[50_000, 50_000], &used, mode, 200_000);
        let got = cpu[0] as f64 / (cpu[0] + cpu[1]) as f64;
        let want = if mode == Mode::NoCompensation { 1.0 / 6.0 } else { 0.5 };
        eprintln!("yielding client's CPU: {got:.4} (want {want:.4})");
        assert!((got - want).abs() < 0.01, "the yielding client got {got:.4} of the CPU, want {want:.4}");
    }
}

/// The lottery's error grows with the square root of the turns, stride scheduling's stays
/// within a quantum (Waldspurger and Weihl 1995, the stride paper's comparison): over
/// 2000 turns of 20 ms at tickets 3:2:1, the largest distance of client 0's CPU from half
/// of all, at any turn. The VM's `lottery` check measures the same, each second.
#[test]
fn the_lottery_s_error_grows_and_stride_s_stays_within_a_quantum() {
    let max_error = |mode| {
        let (order, _) = race(&[30_000, 20_000, 10_000], &[QUANTUM; 3], mode, 2000);
        let (mut err, mut max) = (0i64, 0i64);
        for i in order {
            err += if i == 0 { QUANTUM as i64 / 2 } else { -(QUANTUM as i64) / 2 };
            max = max.max(err.abs());
        }
        max as f64 / 1e6
    };
    let (lottery, stride) = (max_error(Mode::Lottery), max_error(Mode::Stride));
    eprintln!("largest error of the half's CPU over 2000 turns: lottery {lottery:.0} ms, stride {stride:.0} ms (a lottery's sd at the end: 447 ms)");
    assert!(stride <= QUANTUM as f64 / 1e6, "stride's error {stride} ms passed a quantum");
    assert!(lottery >= 150.0, "the lottery's error stayed within {lottery} ms: its turns are not draws");
}
