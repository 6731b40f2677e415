//! The operations listener as tests read it: scrapes of `/metrics` and one sample of them.

use std::time::{Duration, Instant};

use super::dev::{after, Dev};

/// The ops address `skein dev` printed.
pub fn ops_of(dev: &Dev) -> String {
    after(
        &dev.printed,
        "ops: health, readiness and metrics on http://",
    )
    .trim()
    .to_owned()
}

pub fn scrape(ops: &str) -> String {
    let (status, body) = super::http(ops, "GET", "/metrics", None, "");
    assert_eq!(status, 200, "{body}");
    body
}

/// The value of the sample `name{labels}`, all of `labels` among its labels; 0 when there is
/// none (a family shows a label set once it was first counted).
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, label_text) = match series.split_once('{') {
            Some((metric, rest)) => (metric, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if metric != name {
            continue;
        }
        if labels.iter().all(|(k, v)| {
            label_text
                .split(',')
                .any(|pair| pair == format!("{k}=\"{v}\""))
        }) {
            return value.parse().unwrap();
        }
    }
    0.0
}

/// Waits until `check` holds of a scrape; answers that scrape.
pub fn eventually(ops: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = scrape(ops);
        if check(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} never showed:\n{text}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The `skein_` series the Grafana dashboard plots, those `keep` keeps.
pub fn dashboard_series(keep: impl Fn(&str) -> bool) -> Vec<String> {
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../helm/skein/dashboards/skein.json"
    ))
    .unwrap();
    let mut plotted: Vec<String> = dashboard
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("skein_") && keep(word))
        .map(str::to_owned)
        .collect();
    plotted.sort_unstable();
    plotted.dedup();
    plotted
}

/// Asserts that the scrape `text` serves every one of `series`.
pub fn assert_served(series: &[String], text: &str) {
    for series in series {
        // A counter's family is declared without `_total`, a histogram's without `_bucket`.
        let family = series
            .strip_suffix("_total")
            .or_else(|| series.strip_suffix("_bucket"))
            .unwrap_or(series);
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "the dashboard plots {series}, which no service serves:\n{text}"
        );
    }
}
