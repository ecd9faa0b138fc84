//! Least squares: a polynomial (numpy's `polyfit`, coefficients highest degree first) or
//! any linear model given by its columns, with r². Solved by Householder QR on columns
//! scaled to unit length, so ISL² (around 1e9) and a constant column do not swamp each
//! other as they would in the normal equations.

/// Coefficients minimising ‖Σ cⱼ·columnⱼ − y‖², one per column; `None` when the columns
/// are (numerically) dependent or there are fewer rows than columns.
pub fn least_squares(columns: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let (n, k) = (y.len(), columns.len());
    if k == 0 || n < k || columns.iter().any(|c| c.len() != n) {
        return None;
    }
    // Column scaling: solve for cⱼ·‖colⱼ‖, then divide.
    let norms: Vec<f64> = columns
        .iter()
        .map(|c| c.iter().map(|v| v * v).sum::<f64>().sqrt())
        .collect();
    if norms.iter().any(|n| !(*n > 0.0 && n.is_finite())) {
        return None;
    }
    // The columns, scaled; b: the right-hand side. Both are reflected in place.
    let mut a: Vec<Vec<f64>> = columns
        .iter()
        .zip(&norms)
        .map(|(c, n)| c.iter().map(|v| v / n).collect())
        .collect();
    let mut b = y.to_vec();
    for j in 0..k {
        let norm = a[j][j..].iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm < 1e-12 {
            return None;
        }
        let alpha = if a[j][j] > 0.0 { -norm } else { norm };
        // The Householder vector v (rows j..n) maps column j onto alpha·e_j.
        let mut v: Vec<f64> = a[j][j..].to_vec();
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|x| x * x).sum();
        if vv == 0.0 {
            continue;
        }
        let reflect = |col: &mut [f64]| {
            let dot: f64 = v.iter().zip(col.iter()).map(|(p, q)| p * q).sum();
            let f = 2.0 * dot / vv;
            for (c, p) in col.iter_mut().zip(&v) {
                *c -= f * p;
            }
        };
        for col in a.iter_mut().skip(j) {
            reflect(&mut col[j..]);
        }
        reflect(&mut b[j..]);
    }
    // Back substitution on the upper triangle (row j of column c is a[c][j]).
    let mut x = vec![0.0; k];
    for j in (0..k).rev() {
        let s: f64 = (j + 1..k).map(|c| a[c][j] * x[c]).sum();
        if a[j][j].abs() < 1e-12 {
            return None;
        }
        x[j] = (b[j] - s) / a[j][j];
    }
    let out: Vec<f64> = x.iter().zip(&norms).map(|(v, n)| v / n).collect();
    out.iter().all(|v| v.is_finite()).then_some(out)
}

/// 1 − SS_res/SS_tot of `predicted` against `y`; 0 when `y` does not vary (numpy-based
/// AIPerf's convention for a constant series).
pub fn r_squared(y: &[f64], predicted: &[f64]) -> f64 {
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    let ss_tot: f64 = y.iter().map(|v| (v - mean).powi(2)).sum();
    let ss_res: f64 = y.iter().zip(predicted).map(|(v, p)| (v - p).powi(2)).sum();
    if ss_tot == 0.0 {
        0.0
    } else {
        1.0 - ss_res / ss_tot
    }
}

/// A polynomial of degree `deg` through the points: (coefficients highest degree first,
/// r²), as numpy's `polyfit` orders them.
pub fn polyfit(x: &[f64], y: &[f64], deg: usize) -> Option<(Vec<f64>, f64)> {
    let columns: Vec<Vec<f64>> = (0..=deg)
        .rev()
        .map(|p| x.iter().map(|v| v.powi(p as i32)).collect())
        .collect();
    let coeffs = least_squares(&columns, y)?;
    let predicted: Vec<f64> = x.iter().map(|v| polyval(&coeffs, *v)).collect();
    Some((coeffs.clone(), r_squared(y, &predicted)))
}

/// The polynomial `coeffs` (highest degree first) at `x`.
pub fn polyval(coeffs: &[f64], x: f64) -> f64 {
    coeffs.iter().fold(0.0, |acc, c| acc * x + c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn a_line_is_recovered() {
        let x = [256.0, 512.0, 1024.0, 2048.0, 4096.0];
        let y: Vec<f64> = x.iter().map(|v| 0.0125 * v + 20.0).collect();
        let (c, r2) = polyfit(&x, &y, 1).unwrap();
        assert!(
            close(c[0], 0.0125, 1e-9) && close(c[1], 20.0, 1e-9),
            "{c:?}"
        );
        assert!(close(r2, 1.0, 1e-12), "{r2}");
    }

    #[test]
    fn a_quadratic_over_wide_x_is_recovered() {
        // ISL up to 32768: x² ~ 1e9 next to a constant of 15.
        let x = [256.0, 608.0, 1448.0, 3444.0, 8192.0, 19484.0, 32768.0];
        let y: Vec<f64> = x.iter().map(|v| 2e-6 * v * v + 0.01 * v + 15.0).collect();
        let (c, r2) = polyfit(&x, &y, 2).unwrap();
        assert!(close(c[0], 2e-6, 1e-7), "{c:?}");
        assert!(close(c[1], 0.01, 1e-6), "{c:?}");
        assert!(close(c[2], 15.0, 1e-6), "{c:?}");
        assert!(r2 > 0.999_999_999);
        // A line through the same points fits worse.
        let (_, r2_line) = polyfit(&x, &y, 1).unwrap();
        assert!(r2_line < r2);
    }

    #[test]
    fn noisy_points_give_the_least_squares_line() {
        // Hand-computed: x = 1..4, y = 2, 3, 5, 4 -> slope 0.8, intercept 1.5, r² 0.64.
        let (c, r2) = polyfit(&[1.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 5.0, 4.0], 1).unwrap();
        assert!(close(c[0], 0.8, 1e-12) && close(c[1], 1.5, 1e-12), "{c:?}");
        assert!(close(r2, 0.64, 1e-12), "{r2}");
    }

    #[test]
    fn a_plane_is_recovered() {
        // itl = 4 + 0.5·c + 0.002·osl over a 3×3 grid.
        let (mut c, mut o, mut y) = (vec![], vec![], vec![]);
        for ci in [1.0, 4.0, 16.0] {
            for oi in [64.0, 256.0, 1024.0] {
                c.push(ci);
                o.push(oi);
                y.push(4.0 + 0.5 * ci + 0.002 * oi);
            }
        }
        let ones = vec![1.0; y.len()];
        let fit = least_squares(&[ones, c, o], &y).unwrap();
        assert!(close(fit[0], 4.0, 1e-9) && close(fit[1], 0.5, 1e-9) && close(fit[2], 0.002, 1e-9));
    }

    #[test]
    fn degenerate_inputs_have_no_fit() {
        assert!(polyfit(&[5.0, 5.0, 5.0], &[1.0, 2.0, 3.0], 1).is_none());
        assert!(polyfit(&[1.0], &[1.0], 1).is_none());
        // A constant series fits exactly but has r² 0 by convention.
        let (c, r2) = polyfit(&[1.0, 2.0, 3.0], &[7.0, 7.0, 7.0], 1).unwrap();
        assert!(close(c[1], 7.0, 1e-12) && c[0].abs() < 1e-12 && r2 == 0.0);
    }
}
