//! The heat map of a pairwise matrix: a square of cells (row: requester,
//! column: responder), each filled with the colour its caller chose, the figure
//! printed on it when there is room, the faults framed in a thick dark line, and
//! a legend that says what each colour means.
//!
//! The cells are written as SVG `<rect>`s of their own, each with its pair
//! (`data-from`, `data-to`), the meaning of its colour (`data-band`) and a
//! `<title>` the browser shows on hover, without script; everything else is
//! drawn with plotters' primitives on its SVG backend.

use std::fmt::Write as _;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{err, inline, FONT, GREY, INK, LIGHT};
use crate::html::esc;
use crate::ReportError;

/// One measured cell.
pub(crate) struct HeatCell {
    pub fill: RGBColor,
    /// The colour of the figure printed on it (dark on light fills, white on dark).
    pub ink: RGBColor,
    /// The figure printed on the cell.
    pub text: String,
    /// What a pointer over the cell shows: the pair, the figure, its meaning.
    pub title: String,
    /// What the colour stands for (`ok`, `low`, `slow`, ...), as `data-band`.
    pub band: &'static str,
}

/// A legend entry: one colour, a gradient (several), or a dark frame (none).
pub(crate) struct Swatch {
    pub colors: Vec<RGBColor>,
    pub text: String,
}

/// A square matrix of cells, faults framed, a legend beside it.
pub(crate) struct HeatMap<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub labels: Vec<String>,
    /// `[row][column]`; `None`: not measured.
    pub cells: Vec<Vec<Option<HeatCell>>>,
    /// Lines above the legend's swatches (the unit, the levels the colours follow).
    pub legend_title: Vec<String>,
    pub legend: Vec<Swatch>,
    /// Cells outlined (a slow link, both directions).
    pub outline_cells: Vec<(usize, usize)>,
    /// Rows and columns outlined (a slow node).
    pub outline_lines: Vec<usize>,
}

const NOT_MEASURED: RGBColor = RGBColor(250, 250, 250);

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

pub(crate) fn heat_map(h: &HeatMap) -> Result<String, ReportError> {
    let n = h.labels.len().max(1) as i32;
    let cell = (560 / n).clamp(18, 72);
    let show_text = cell >= 44;
    let label_w = h
        .labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(2)
        .clamp(2, 24) as i32
        * 8
        + 40;
    // Narrow columns: their names written upwards, above them.
    let upright = cell < 44;
    let y0 = if upright { 60 + label_w - 40 } else { 78 };
    let x0 = label_w;
    let legend_x = x0 + n * cell + 28;
    let legend_chars = h
        .legend
        .iter()
        .map(|s| s.text.chars().count() + 5)
        .chain(h.legend_title.iter().map(|t| t.chars().count()))
        .max()
        .unwrap_or(10)
        .clamp(20, 60) as i32;
    let width = legend_x + legend_chars * 8 + 16;
    let legend_h = 20 * (h.legend_title.len() + h.legend.len()) as i32 + 10;
    let height = y0 + (n * cell).max(120).max(legend_h) + 44;
    let centre = Pos::new;
    let mut buf = String::new();
    {
        let root =
            SVGBackend::with_string(&mut buf, (width as u32, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(h.id, e))?;
        let e = |x| err(h.id, x);
        root.draw(&Text::new(
            h.title,
            (16, 10),
            (FONT, 18).into_font().color(&INK),
        ))
        .map_err(e)?;
        root.draw(&Text::new(
            "responder (to) →",
            (x0 + n * cell / 2, 36),
            (FONT, 13)
                .into_font()
                .color(&GREY)
                .pos(centre(HPos::Center, VPos::Top)),
        ))
        .map_err(e)?;
        root.draw(&Text::new(
            "requester (from) ↓",
            (16, 36),
            (FONT, 13).into_font().color(&GREY),
        ))
        .map_err(e)?;
        for (i, l) in h.labels.iter().enumerate() {
            let i = i as i32;
            let column = if upright {
                (FONT, 13)
                    .into_font()
                    .transform(FontTransform::Rotate270)
                    .color(&INK)
                    .pos(centre(HPos::Left, VPos::Center))
            } else {
                (FONT, 13)
                    .into_font()
                    .color(&INK)
                    .pos(centre(HPos::Center, VPos::Bottom))
            };
            root.draw(&Text::new(
                l.as_str(),
                (x0 + i * cell + cell / 2, y0 - 6),
                column,
            ))
            .map_err(e)?;
            root.draw(&Text::new(
                l.as_str(),
                (x0 - 8, y0 + i * cell + cell / 2),
                (FONT, 13)
                    .into_font()
                    .color(&INK)
                    .pos(centre(HPos::Right, VPos::Center)),
            ))
            .map_err(e)?;
        }
        // The figures on the cells (the cells themselves are written below).
        for r in 0..n as usize {
            for c in 0..n as usize {
                let v = h
                    .cells
                    .get(r)
                    .and_then(|row| row.get(c))
                    .and_then(Option::as_ref);
                let (text, ink) = match v {
                    _ if r == c => ("—".to_string(), INK),
                    Some(v) => (v.text.clone(), v.ink),
                    None => ("·".to_string(), INK),
                };
                if show_text || r == c || v.is_none() {
                    let (x, y) = (x0 + c as i32 * cell, y0 + r as i32 * cell);
                    root.draw(&Text::new(
                        text,
                        (x + cell / 2, y + cell / 2),
                        (FONT, 14)
                            .into_font()
                            .color(&ink)
                            .pos(centre(HPos::Center, VPos::Center)),
                    ))
                    .map_err(e)?;
                }
            }
        }
        // Outlines as closed paths (SVG rects carry no stroke width), dark: they
        // must stand out on red cells too.
        let outline = |a: (i32, i32), b: (i32, i32)| {
            PathElement::new(
                vec![(a.0, a.1), (b.0, a.1), (b.0, b.1), (a.0, b.1), (a.0, a.1)],
                INK.stroke_width(4),
            )
        };
        for &i in &h.outline_lines {
            let i = i as i32;
            if i >= n {
                continue;
            }
            root.draw(&outline(
                (x0, y0 + i * cell),
                (x0 + n * cell, y0 + (i + 1) * cell),
            ))
            .map_err(e)?;
            root.draw(&outline(
                (x0 + i * cell, y0),
                (x0 + (i + 1) * cell, y0 + n * cell),
            ))
            .map_err(e)?;
        }
        for &(r, c) in &h.outline_cells {
            let (r, c) = (r as i32, c as i32);
            if r >= n || c >= n {
                continue;
            }
            let (x, y) = (x0 + c * cell, y0 + r * cell);
            root.draw(&outline((x + 2, y + 2), (x + cell - 2, y + cell - 2)))
                .map_err(e)?;
        }
        // The legend: what the colours mean.
        let mut y = y0;
        for t in &h.legend_title {
            root.draw(&Text::new(
                t.as_str(),
                (legend_x, y + 7),
                (FONT, 14)
                    .into_font()
                    .color(&GREY)
                    .pos(centre(HPos::Left, VPos::Center)),
            ))
            .map_err(e)?;
            y += 20;
        }
        for s in &h.legend {
            match s.colors.len() {
                0 => root
                    .draw(&PathElement::new(
                        vec![
                            (legend_x + 1, y + 1),
                            (legend_x + 27, y + 1),
                            (legend_x + 27, y + 13),
                            (legend_x + 1, y + 13),
                            (legend_x + 1, y + 1),
                        ],
                        INK.stroke_width(3),
                    ))
                    .map_err(e)?,
                k => {
                    let k = k as i32;
                    for (j, c) in s.colors.iter().enumerate() {
                        let j = j as i32;
                        root.draw(&Rectangle::new(
                            [
                                (legend_x + j * 28 / k, y),
                                (legend_x + (j + 1) * 28 / k, y + 14),
                            ],
                            c.filled(),
                        ))
                        .map_err(e)?;
                    }
                }
            }
            root.draw(&Text::new(
                s.text.as_str(),
                (legend_x + 36, y + 7),
                (FONT, 15)
                    .into_font()
                    .color(&INK)
                    .pos(centre(HPos::Left, VPos::Center)),
            ))
            .map_err(e)?;
            y += 20;
        }
        root.present().map_err(e)?;
    }
    // The cells, right after the background so that figures and frames lie on them.
    let mut cells = String::from("<g class=\"cells\">\n");
    for r in 0..n as usize {
        for c in 0..n as usize {
            let from = h.labels.get(r).map_or("", String::as_str);
            let to = h.labels.get(c).map_or("", String::as_str);
            let v = h
                .cells
                .get(r)
                .and_then(|row| row.get(c))
                .and_then(Option::as_ref);
            let (fill, band, title) = match v {
                _ if r == c => (LIGHT, "self", format!("{from} with itself: not measured")),
                Some(v) => (v.fill, v.band, v.title.clone()),
                None => (
                    NOT_MEASURED,
                    "not-measured",
                    format!("{from} → {to}: not measured"),
                ),
            };
            let _ = writeln!(
                cells,
                "<rect x=\"{}\" y=\"{}\" width=\"{cell}\" height=\"{cell}\" fill=\"{}\" \
                 stroke=\"#FFFFFF\" stroke-width=\"1\" data-from=\"{}\" data-to=\"{}\" \
                 data-band=\"{band}\"><title>{}</title></rect>",
                x0 + c as i32 * cell,
                y0 + r as i32 * cell,
                hex(fill),
                esc(from),
                esc(to),
                esc(&title)
            );
        }
    }
    cells.push_str("</g>\n");
    let at = buf
        .find("<rect")
        .and_then(|i| buf[i..].find("/>").map(|j| i + j + 2))
        .ok_or_else(|| err(h.id, "no background in plotters' SVG"))?;
    buf.insert_str(at, &format!("\n{cells}"));
    Ok(inline(buf, h.id, h.title))
}
