//! A run over time, for `lagless run --plot FILE`: what the first client's player felt,
//! moment by moment, where the report's percentiles hide when and how long.
//!
//! Four series share the run's time axis (seconds): the own player's on-screen error
//! against the server (`render.error_cm_*` frame by frame), how old the others on screen
//! are (the interpolation delay plus the way down), how long an input waited before the
//! server applied it (`input.delay_ms_*`), and the downlink per second
//! (`net.down_kbps_*`). [`Timeline::write_svg`] draws them as four stacked panels.

use plotters::prelude::*;
use std::path::Path;

/// Points `(seconds, value)` of one series.
pub type Series = Vec<(f64, f64)>;

/// The first client's run over time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Timeline {
    /// The own player's on-screen error against the server's state of the same tick, cm,
    /// one point per rendered tick.
    pub render_error_cm: Series,
    /// How old the others on screen are: the client's estimate of the server's time
    /// minus the render tick, ms, one point per client tick (the interpolation delay plus
    /// the way down).
    pub interpolation_delay_ms: Series,
    /// From an input's sampling to the server applying it, ms, one point per applied
    /// input.
    pub input_delay_ms: Series,
    /// Downlink, kbit/s (UDP/IP headers counted), one point per second.
    pub down_kbps: Series,
    /// The server's snapshot budget for the client, kbit/s, one point per snapshot
    /// sent (empty without a budget).
    pub budget_kbps: Series,
}

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
#[error("could not draw the plot: {0}")]
pub struct PlotError(String);

impl Timeline {
    /// Draws the four series, one panel each over the same time axis in seconds, as an SVG image
    /// (any browser shows it) at `path`; `title` heads it.
    pub fn write_svg(&self, path: &Path, title: &str) -> Result<(), PlotError> {
        let err = |e: &dyn std::fmt::Display| PlotError(e.to_string());
        let root = SVGBackend::new(path, (1000, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(title, ("sans-serif", 20))
            .map_err(|e| err(&e))?;
        let seconds = [
            &self.render_error_cm,
            &self.interpolation_delay_ms,
            &self.input_delay_ms,
            &self.down_kbps,
        ]
        .iter()
        .flat_map(|s| s.iter().map(|p| p.0))
        .fold(1.0_f64, f64::max);
        let panels = root.split_evenly((4, 1));
        let rows: [(&Series, &str, RGBColor); 4] = [
            (
                &self.render_error_cm,
                "own player error, cm (render.error_cm)",
                RED,
            ),
            (
                &self.interpolation_delay_ms,
                "age of the others on screen, ms (feel.view_age_ms)",
                BLUE,
            ),
            (
                &self.input_delay_ms,
                "input wait at the server, ms (input.delay_ms)",
                MAGENTA,
            ),
            (
                &self.down_kbps,
                "downlink, kbit/s (net.down_kbps)",
                RGBColor(0, 128, 0),
            ),
        ];
        for (panel, (series, label, color)) in panels.iter().zip(rows) {
            draw_panel(panel, series, label, color, seconds).map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    }
}

/// One series in its panel: time on x, its value on y from 0 to a little above its
/// largest finite value.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &Series,
    label: &str,
    color: RGBColor,
    seconds: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let finite = || series.iter().filter(|p| p.1.is_finite());
    let top = finite().map(|p| p.1).fold(0.0_f64, f64::max).max(1e-3) * 1.05;
    let mut chart = ChartBuilder::on(area)
        .caption(label, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(25)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..seconds, 0.0..top)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    chart.draw_series(LineSeries::new(finite().copied(), &color))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_svg_with_every_series_is_written() {
        let t = Timeline {
            render_error_cm: vec![(0.0, 1.0), (1.0, 5.0), (2.0, f64::NAN), (3.0, 2.0)],
            interpolation_delay_ms: vec![(0.0, 100.0), (3.0, 80.0)],
            input_delay_ms: vec![(0.5, 60.0)],
            down_kbps: Vec::new(),
            budget_kbps: Vec::new(),
        };
        let dir = std::env::temp_dir().join(format!("lagless-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("run.svg");
        t.write_svg(&path, "cubes over mobile").expect("written");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        for label in ["render.error_cm", "feel.view_age_ms", "net.down_kbps"] {
            assert!(svg.contains(label), "{label} missing");
        }
        // A line in each series' colour, none for the empty downlink.
        for colour in ["#FF0000", "#0000FF", "#FF00FF"] {
            let line = format!("stroke=\"{colour}\" stroke-width=\"1\" points=");
            assert_eq!(svg.matches(&line).count(), 1, "{colour}");
        }
        assert!(!svg.contains("stroke=\"#008000\" stroke-width=\"1\" points="));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
