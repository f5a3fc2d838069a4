//! Plots as inline SVG, drawn with plotters' SVG backend (no fonts loaded: text
//! is written as SVG `<text>` and laid out by the browser).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::ReportError;

mod heat;

pub(crate) use heat::{heat_map, HeatCell, HeatMap, Swatch};

pub(crate) const BLUE: RGBColor = RGBColor(11, 107, 203);
pub(crate) const ORANGE: RGBColor = RGBColor(230, 120, 20);
pub(crate) const GREEN: RGBColor = RGBColor(26, 127, 55);
pub(crate) const RED: RGBColor = RGBColor(198, 40, 40);
pub(crate) const GREY: RGBColor = RGBColor(140, 148, 158);
pub(crate) const LIGHT: RGBColor = RGBColor(236, 239, 242);
pub(crate) const INK: RGBColor = RGBColor(29, 36, 48);

const FONT: &str = "sans-serif";

fn err(plot: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Plot {
        plot: plot.to_string(),
        detail: e.to_string(),
    }
}

/// An SVG of `size` pixels on white, drawn by `draw`, as an inline element
/// (see [`inline`]); `id` names the plot in errors.
fn svg(
    id: &str,
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(id, e))?;
        draw(&root)?;
        root.present().map_err(|e| err(id, e))?;
    }
    Ok(inline(buf, id, title))
}

/// Makes plotters' SVG an inline element of the page: no namespace URL (HTML
/// parsers put inline `<svg>` in the SVG namespace themselves), no `//` in any
/// text, and a `data-plot` name the browser test finds it by.
fn inline(svg: String, id: &str, title: &str) -> String {
    let svg = svg.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "");
    let mut out = String::with_capacity(svg.len() + 64);
    let mut prev_slash = false;
    for c in svg.chars() {
        if c == '/' && prev_slash {
            out.push_str("&#47;");
            prev_slash = false;
            continue;
        }
        prev_slash = c == '/';
        out.push(c);
    }
    let head = format!(
        "<svg data-plot=\"{}\" role=\"img\" aria-label=\"{}\" ",
        crate::html::esc(id),
        crate::html::esc(title)
    );
    out.replacen("<svg ", &head, 1)
}

/// One line of a line chart.
pub(crate) struct Series {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// A line chart against message size on a log2 axis.
pub(crate) struct SizeChart<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub y_desc: &'a str,
    /// A log y axis (latency: the tail is orders of magnitude above the median).
    pub y_log: bool,
    pub series: Vec<Series>,
}

/// `2`, `512`, `4K`, `8M`.
pub(crate) fn size_label(x: f64) -> String {
    let v = x.round() as u64;
    if v >= 1 << 30 && v.is_multiple_of(1 << 30) {
        format!("{}G", v >> 30)
    } else if v >= 1 << 20 && v.is_multiple_of(1 << 20) {
        format!("{}M", v >> 20)
    } else if v >= 1 << 10 && v.is_multiple_of(1 << 10) {
        format!("{}K", v >> 10)
    } else {
        v.to_string()
    }
}

fn y_label(y: f64) -> String {
    let a = y.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{y:.0}")
    } else if a >= 10.0 {
        format!("{y:.1}")
    } else if a >= 0.1 {
        format!("{y:.2}")
    } else if a >= 0.01 {
        format!("{y:.3}")
    } else if a >= 0.001 {
        format!("{y:.4}")
    } else {
        format!("{y:.1e}")
    }
}

pub(crate) fn size_chart(c: &SizeChart) -> Result<String, ReportError> {
    let pts = c.series.iter().flat_map(|s| s.points.iter());
    let (mut xmin, mut xmax, mut ymax) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in pts {
        if x.is_finite() && *x > 0.0 {
            xmin = xmin.min(*x);
            xmax = xmax.max(*x);
        }
        if y.is_finite() {
            ymax = ymax.max(*y);
        }
    }
    if xmin > xmax {
        (xmin, xmax) = (1.0, 2.0);
    }
    if xmin == xmax {
        (xmin, xmax) = (xmin / 2.0, xmax * 2.0);
    }
    let mut ymin = f64::MAX;
    for (_, y) in c.series.iter().flat_map(|s| s.points.iter()) {
        if y.is_finite() && *y > 0.0 {
            ymin = ymin.min(*y);
        }
    }
    let ymax = if ymax > 0.0 { ymax * 1.12 } else { 1.0 };
    svg(c.id, c.title, (580, 350), |root| {
        let builder = |root| {
            let mut b = ChartBuilder::on(root);
            b.caption(c.title, (FONT, 20))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(64);
            b
        };
        let x = (xmin..xmax).log_scale().base(2.0);
        // The body is the same for both y axes; their coordinate types differ.
        macro_rules! draw {
            ($chart:ident, $y_desc:expr) => {{
                $chart
                    .configure_mesh()
                    .x_desc("message size [bytes] (log scale)")
                    .y_desc($y_desc)
                    .x_label_formatter(&|x| size_label(*x))
                    .y_label_formatter(&|y| y_label(*y))
                    .light_line_style(LIGHT)
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 15))
                    .draw()
                    .map_err(|e| err(c.id, e))?;
                for s in &c.series {
                    let color = s.color;
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|(x, y)| {
                            x.is_finite() && *x > 0.0 && y.is_finite() && (!c.y_log || *y > 0.0)
                        })
                        .collect();
                    $chart
                        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                        .map_err(|e| err(c.id, e))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                        });
                    $chart
                        .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                        .map_err(|e| err(c.id, e))?;
                }
                $chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperLeft)
                    .background_style(WHITE.mix(0.85))
                    .border_style(GREY)
                    .label_font((FONT, 14))
                    .draw()
                    .map_err(|e| err(c.id, e))?;
            }};
        }
        if c.y_log && ymin < f64::MAX {
            let lo = ymin / 1.5;
            let hi = (ymax * 2.0).max(lo * 10.0);
            let mut chart = builder(root)
                .build_cartesian_2d(x, (lo..hi).log_scale())
                .map_err(|e| err(c.id, e))?;
            draw!(chart, format!("{} (log scale)", c.y_desc));
        } else {
            let mut chart = builder(root)
                .build_cartesian_2d(x, 0f64..ymax)
                .map_err(|e| err(c.id, e))?;
            draw!(chart, c.y_desc.to_string());
        }
        Ok(())
    })
}

/// One bar of a bar chart.
pub(crate) struct Bar {
    pub label: String,
    pub value: f64,
    pub color: RGBColor,
}

/// Bars over categories (CPUs), each with its own color, and a legend of colors.
pub(crate) struct BarChart<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub y_desc: &'a str,
    pub bars: Vec<Bar>,
    pub legend: Vec<(String, RGBColor)>,
}

pub(crate) fn bar_chart(c: &BarChart) -> Result<String, ReportError> {
    let n = c.bars.len().max(1);
    let ymax = c
        .bars
        .iter()
        .map(|b| b.value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let ymax = if ymax > 0.0 {
        (ymax * 1.25).ceil()
    } else {
        1.0
    };
    let width = (160 + 40 * n as u32).clamp(560, 1200);
    let labels: Vec<String> = c.bars.iter().map(|b| b.label.clone()).collect();
    svg(c.id, c.title, (width, 300), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(c.title, (FONT, 19))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
            .map_err(|e| err(c.id, e))?;
        let fmt = |x: &f64| {
            let i = x.floor();
            if (x - i - 0.5).abs() < 1e-6 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        // Counts: one label per whole number (at most ten).
        let whole = |y: &f64| {
            if (y - y.round()).abs() < 1e-9 {
                format!("{y:.0}")
            } else {
                String::new()
            }
        };
        let y_ticks = (ymax.floor() as usize + 1).clamp(2, 11);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&fmt)
            .y_desc(c.y_desc)
            .y_labels(y_ticks)
            .y_label_formatter(&whole)
            .light_line_style(LIGHT)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(|e| err(c.id, e))?;
        chart
            .draw_series(c.bars.iter().enumerate().map(|(i, b)| {
                let x = i as f64;
                Rectangle::new([(x + 0.15, 0.0), (x + 0.85, b.value)], b.color.filled())
            }))
            .map_err(|e| err(c.id, e))?;
        for (name, color) in &c.legend {
            let color = *color;
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(|e| err(c.id, e))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        if !c.legend.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(GREY)
                .label_font((FONT, 14))
                .draw()
                .map_err(|e| err(c.id, e))?;
        }
        Ok(())
    })
}

/// A box of a diagram: lines of text, the first in bold.
pub(crate) struct Node {
    pub lines: Vec<String>,
    pub border: RGBColor,
    pub fill: RGBColor,
}

/// A column of a left-to-right diagram, with the edge that enters it.
pub(crate) struct Column {
    pub nodes: Vec<Node>,
}

/// An edge between consecutive columns: from node `from` of column `i` to node
/// `to` of column `i + 1`, labelled, in a color.
pub(crate) struct Edge {
    pub column: usize,
    pub from: usize,
    pub to: usize,
    pub label: Vec<String>,
    pub color: RGBColor,
    pub dashed: bool,
}

/// A left-to-right diagram: columns of boxes joined by labelled edges (the PCIe path).
pub(crate) struct Diagram<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub columns: Vec<Column>,
    pub edges: Vec<Edge>,
}

const BOX_W: i32 = 190;
const GAP_W: i32 = 96;
const LINE_H: i32 = 18;

fn box_h(n: &Node) -> i32 {
    12 + LINE_H * n.lines.len().max(1) as i32
}

pub(crate) fn diagram(d: &Diagram) -> Result<String, ReportError> {
    let ncol = d.columns.len().max(1) as i32;
    let col_h = |c: &Column| c.nodes.iter().map(|n| box_h(n) + 18).sum::<i32>();
    let height = d.columns.iter().map(col_h).max().unwrap_or(60).max(60) + 44;
    let width = 24 + ncol * BOX_W + (ncol - 1) * GAP_W + 24;
    // Box positions: each column centred vertically.
    let mut pos: Vec<Vec<(i32, i32, i32)>> = Vec::new();
    for (ci, c) in d.columns.iter().enumerate() {
        let x = 24 + ci as i32 * (BOX_W + GAP_W);
        let mut y = 40 + (height - 40 - col_h(c)) / 2;
        let mut v = Vec::new();
        for n in &c.nodes {
            let h = box_h(n);
            v.push((x, y, h));
            y += h + 18;
        }
        pos.push(v);
    }
    svg(d.id, d.title, (width as u32, height as u32), |root| {
        root.draw(&Text::new(
            d.title,
            (24, 12),
            (FONT, 18).into_font().color(&INK),
        ))
        .map_err(|e| err(d.id, e))?;
        for e in &d.edges {
            let (Some(a), Some(b)) = (
                pos.get(e.column).and_then(|c| c.get(e.from)),
                pos.get(e.column + 1).and_then(|c| c.get(e.to)),
            ) else {
                continue;
            };
            let p0 = (a.0 + BOX_W, a.1 + a.2 / 2);
            let p1 = (b.0, b.1 + b.2 / 2);
            let style = e.color.stroke_width(if e.dashed { 2 } else { 3 });
            if e.dashed {
                let segs = 12;
                for i in (0..segs).step_by(2) {
                    let f0 = i as f64 / segs as f64;
                    let f1 = (i + 1) as f64 / segs as f64;
                    let lerp = |f: f64| {
                        (
                            p0.0 + ((p1.0 - p0.0) as f64 * f) as i32,
                            p0.1 + ((p1.1 - p0.1) as f64 * f) as i32,
                        )
                    };
                    root.draw(&PathElement::new(vec![lerp(f0), lerp(f1)], style))
                        .map_err(|e| err(d.id, e))?;
                }
            } else {
                root.draw(&PathElement::new(vec![p0, p1], style))
                    .map_err(|e| err(d.id, e))?;
            }
            let mid = ((p0.0 + p1.0) / 2, (p0.1 + p1.1) / 2);
            let n = e.label.len() as i32;
            for (i, l) in e.label.iter().enumerate() {
                let y = mid.1 - 6 - (n - i as i32) * 15 + 15;
                root.draw(&Text::new(
                    l.as_str(),
                    (mid.0, y),
                    (FONT, 13).into_font().color(&e.color).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Center,
                            plotters::style::text_anchor::VPos::Bottom,
                        ),
                    ),
                ))
                .map_err(|er| err(d.id, er))?;
            }
        }
        for (ci, c) in d.columns.iter().enumerate() {
            for (ni, n) in c.nodes.iter().enumerate() {
                let (x, y, h) = pos[ci][ni];
                root.draw(&Rectangle::new(
                    [(x, y), (x + BOX_W, y + h)],
                    n.fill.filled(),
                ))
                .map_err(|e| err(d.id, e))?;
                root.draw(&Rectangle::new(
                    [(x, y), (x + BOX_W, y + h)],
                    n.border.stroke_width(2),
                ))
                .map_err(|e| err(d.id, e))?;
                for (li, l) in n.lines.iter().enumerate() {
                    let font = if li == 0 {
                        (FONT, 15).into_font().style(FontStyle::Bold)
                    } else {
                        (FONT, 13).into_font()
                    };
                    root.draw(&Text::new(
                        l.as_str(),
                        (x + 8, y + 6 + li as i32 * LINE_H),
                        font.color(&INK),
                    ))
                    .map_err(|e| err(d.id, e))?;
                }
            }
        }
        Ok(())
    })
}

/// One dot of a dot plot: a node's value on a row.
pub(crate) struct Dot {
    pub row: usize,
    pub value: f64,
    /// Outliers are drawn large, in red, with their label beside them.
    pub outlier: bool,
    pub label: String,
}

/// Values of many nodes on rows (one row per port): a dot per node, the row's
/// median as a grey tick, outliers red and named.
pub(crate) struct DotPlot<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub x_desc: &'a str,
    pub rows: Vec<String>,
    /// The median of each row (`rows` order).
    pub medians: Vec<f64>,
    pub dots: Vec<Dot>,
}

pub(crate) fn dot_plot(c: &DotPlot) -> Result<String, ReportError> {
    let nrows = c.rows.len().max(1);
    let finite = c.dots.iter().map(|d| d.value).filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let hi = if hi > lo {
        hi + (hi - lo) * 0.12
    } else {
        lo + 1.0
    };
    let label_w = c
        .rows
        .iter()
        .map(|r| r.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 40) as u32
        * 8
        + 16;
    let height = (100 + 56 * nrows as u32).min(1400);
    let labels = c.rows.clone();
    svg(c.id, c.title, (560, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(c.title, (FONT, 17))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_w)
            .build_cartesian_2d(lo..hi, 0f64..nrows as f64)
            .map_err(|e| err(c.id, e))?;
        let row_label = |y: &f64| {
            let i = y.floor();
            if (y - i - 0.5).abs() < 1e-6 {
                // Rows run top to bottom.
                labels
                    .get(nrows - 1 - i as usize)
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(nrows * 2 + 1)
            .y_label_formatter(&row_label)
            .x_label_formatter(&|x| y_label(*x))
            .x_desc(c.x_desc)
            .light_line_style(LIGHT)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(|e| err(c.id, e))?;
        let y_of = |row: usize| (nrows - 1 - row) as f64;
        for (row, m) in c.medians.iter().enumerate() {
            if m.is_finite() {
                let y = y_of(row);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(*m, y + 0.12), (*m, y + 0.88)],
                        GREY.stroke_width(2),
                    )))
                    .map_err(|e| err(c.id, e))?;
            }
        }
        // Equal values of a row side by side: spread vertically around the row's middle.
        let mut placed: Vec<(f64, f64, &Dot)> = Vec::new();
        for row in 0..nrows {
            let mut in_row: Vec<&Dot> = c
                .dots
                .iter()
                .filter(|d| d.row == row && d.value.is_finite())
                .collect();
            in_row.sort_by(|a, b| a.value.total_cmp(&b.value));
            let mut i = 0;
            while i < in_row.len() {
                let same = in_row[i..]
                    .iter()
                    .take_while(|d| d.value == in_row[i].value)
                    .count();
                let step = (0.7 / same as f64).min(0.12);
                for (k, d) in in_row[i..i + same].iter().enumerate() {
                    let off = (k as f64 - (same as f64 - 1.0) / 2.0) * step;
                    placed.push((d.value, y_of(row) + 0.5 + off, d));
                }
                i += same;
            }
        }
        chart
            .draw_series(
                placed
                    .iter()
                    .filter(|p| !p.2.outlier)
                    .map(|p| Circle::new((p.0, p.1), 4, BLUE.mix(0.75).filled())),
            )
            .map_err(|e| err(c.id, e))?;
        for p in placed.iter().filter(|p| p.2.outlier) {
            chart
                .draw_series(std::iter::once(Circle::new((p.0, p.1), 6, RED.filled())))
                .map_err(|e| err(c.id, e))?;
            chart
                .draw_series(std::iter::once(Circle::new(
                    (p.0, p.1),
                    10,
                    RED.stroke_width(2),
                )))
                .map_err(|e| err(c.id, e))?;
            // The name beside the ring, on the side with room.
            let right = p.0 > lo + (hi - lo) * 0.6;
            let (hp, dx) = if right {
                (plotters::style::text_anchor::HPos::Right, -13)
            } else {
                (plotters::style::text_anchor::HPos::Left, 13)
            };
            let style =
                (FONT, 14)
                    .into_font()
                    .color(&RED)
                    .pos(plotters::style::text_anchor::Pos::new(
                        hp,
                        plotters::style::text_anchor::VPos::Center,
                    ));
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((p.0, p.1)) + Text::new(p.2.label.clone(), (dx, 0), style),
                ))
                .map_err(|e| err(c.id, e))?;
        }
        Ok(())
    })
}
