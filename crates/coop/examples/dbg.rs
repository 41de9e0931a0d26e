use hsched_sim::player::{run_players, PlayerExperiment, PlayerSched};
fn main() {
    let mut e = PlayerExperiment::new(10, PlayerSched::Coop { period: 20_000_000 });
    e.duration = 6_000_000_000;
    let r = run_players(&e).unwrap();
    println!("{r:?}");
}
