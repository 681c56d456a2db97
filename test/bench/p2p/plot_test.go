//go:build bench && linux

package p2p

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"slices"
	"strconv"
	"unicode"

	"github.com/shoal-io/shoal/internal/fsutil"
)

// cdfSeries is one curve of a CDF plot: a name for the legend and its
// samples in seconds, in any order. NaN and infinite values are ignored.
type cdfSeries struct {
	Name   string
	Values []float64
}

const (
	// plotWidth and plotHeight are the size of the picture in pixels.
	plotWidth, plotHeight = 900, 560
	// plotLeft, plotRight, plotTop and plotBottom bound the plotting area.
	plotLeft, plotRight, plotTop, plotBottom = 100, plotWidth - 30, 50, plotHeight - 80
	// textScale magnifies the 5x7 glyphs.
	textScale = 2
	// glyphAdvance and glyphHeight are a character's cell at textScale.
	glyphAdvance, glyphHeight = (glyphCols + 1) * textScale, glyphRows * textScale
	// glyphCols and glyphRows are the size of a glyph of plotFont.
	glyphCols, glyphRows = 5, 7
	// xTickTarget is about how many intervals the x axis is cut into.
	xTickTarget = 8
)

var (
	// plotBackground, plotInk and plotGrid colour the canvas, the axes and
	// text, and the grid lines.
	plotBackground = color.RGBA{R: 255, G: 255, B: 255, A: 255}
	plotInk        = color.RGBA{R: 0, G: 0, B: 0, A: 255}
	plotGrid       = color.RGBA{R: 220, G: 220, B: 220, A: 255}
	// plotPalette colours the series, in order (Tableau 10), cycling.
	plotPalette = []color.RGBA{
		{R: 31, G: 119, B: 180, A: 255},
		{R: 255, G: 127, B: 14, A: 255},
		{R: 44, G: 160, B: 44, A: 255},
		{R: 214, G: 39, B: 40, A: 255},
		{R: 148, G: 103, B: 189, A: 255},
		{R: 140, G: 86, B: 75, A: 255},
		{R: 227, G: 119, B: 194, A: 255},
		{R: 127, G: 127, B: 127, A: 255},
		{R: 188, G: 189, B: 34, A: 255},
		{R: 23, G: 190, B: 207, A: 255},
	}
)

// writeCDFPNG draws the empirical CDF of each series (a step plot, y from
// 0 to 1) with axes, ticks, the title, xLabel and a legend, and writes it
// as a PNG to path atomically (a temporary file in the same directory,
// renamed).
func writeCDFPNG(path, title string, xLabel string, series []cdfSeries) error {
	if len(series) == 0 {
		return errors.New("cdf plot: no series")
	}
	img := renderCDF(title, xLabel, series)
	if err := writePNGAtomic(path, img); err != nil {
		return fmt.Errorf("cdf plot %q: %w", title, err)
	}
	return nil
}

// renderCDF draws the plot writeCDFPNG writes.
func renderCDF(title, xLabel string, series []cdfSeries) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, plotWidth, plotHeight))
	fillRect(img, img.Bounds(), plotBackground)

	sorted := make([][]float64, len(series))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		for _, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			sorted[i] = append(sorted[i], v)
			lo, hi = min(lo, v), max(hi, v)
		}
		slices.Sort(sorted[i])
	}
	start, step, n := xAxis(lo, hi)
	end := start + float64(n)*step
	px := func(x float64) int {
		return plotLeft + int(math.Round((x-start)/(end-start)*float64(plotRight-plotLeft)))
	}
	py := func(y float64) int {
		return plotBottom - int(math.Round(y*float64(plotBottom-plotTop)))
	}

	// Grid, ticks and tick labels.
	decimals := tickDecimals(step)
	for i := 0; i <= n; i++ {
		x := px(start + float64(i)*step)
		fillRect(img, image.Rect(x, plotTop, x+1, plotBottom), plotGrid)
		fillRect(img, image.Rect(x, plotBottom, x+1, plotBottom+6), plotInk)
		label := strconv.FormatFloat(start+float64(i)*step, 'f', decimals, 64)
		drawText(img, x-textWidth(label)/2, plotBottom+12, label, plotInk)
	}
	for i := 0; i <= 5; i++ {
		y := py(float64(i) / 5)
		fillRect(img, image.Rect(plotLeft, y, plotRight, y+1), plotGrid)
		fillRect(img, image.Rect(plotLeft-6, y, plotLeft, y+1), plotInk)
		label := strconv.FormatFloat(float64(i)/5, 'f', 1, 64)
		drawText(img, plotLeft-12-textWidth(label), y-glyphHeight/2, label, plotInk)
	}

	// Axes, title and labels.
	fillRect(img, image.Rect(plotLeft-1, plotTop, plotLeft+1, plotBottom+1), plotInk)
	fillRect(img, image.Rect(plotLeft-1, plotBottom, plotRight+1, plotBottom+2), plotInk)
	drawText(img, (plotWidth-textWidth(title))/2, 16, title, plotInk)
	drawText(img, (plotLeft+plotRight-textWidth(xLabel))/2, plotHeight-32, xLabel, plotInk)
	drawText(img, 8, (plotTop+plotBottom-glyphHeight)/2, "CDF", plotInk)

	// The curves: from (start, 0), a step up by 1/len at each sample, then
	// flat at 1 to the end of the axis.
	clip := image.Rect(plotLeft, plotTop-1, plotRight+1, plotBottom+1)
	for i, vs := range sorted {
		if len(vs) == 0 {
			continue
		}
		c := plotPalette[i%len(plotPalette)]
		x0, y0 := px(start), py(0)
		for j, v := range vs {
			x, y := px(v), py(float64(j+1)/float64(len(vs)))
			hLine(img, clip, x0, x, y0, c)
			vLine(img, clip, x, y0, y, c)
			x0, y0 = x, y
		}
		hLine(img, clip, x0, px(end), y0, c)
	}

	// Legend, bottom right inside the plotting area.
	width := 0
	for _, s := range series {
		width = max(width, textWidth(s.Name))
	}
	const rowHeight, swatch, pad = glyphHeight + 8, 24, 8
	box := image.Rect(0, 0, pad+swatch+pad+width+pad, pad+rowHeight*len(series))
	box = box.Add(image.Pt(plotRight-12-box.Dx(), plotBottom-12-box.Dy()))
	fillRect(img, box, plotBackground)
	strokeRect(img, box, plotInk)
	for i, s := range series {
		c := plotPalette[i%len(plotPalette)]
		y := box.Min.Y + pad + i*rowHeight
		fillRect(img, image.Rect(box.Min.X+pad, y+glyphHeight/2-1, box.Min.X+pad+swatch, y+glyphHeight/2+2), c)
		drawText(img, box.Min.X+pad+swatch+pad, y, s.Name, plotInk)
	}
	return img
}

// xAxis picks a round axis from lo to hi (the data's range; lo > hi when
// there is no data): it starts at start and has n intervals of step.
// Ranges of non-negative data that reach below half their top start at 0.
func xAxis(lo, hi float64) (start, step float64, n int) {
	switch {
	case lo > hi:
		lo, hi = 0, 1
	case lo == hi && lo == 0:
		hi = 1
	case lo == hi:
		d := math.Abs(lo) / 2
		lo, hi = lo-d, hi+d
	}
	if lo >= 0 && lo <= hi/2 {
		lo = 0
	}
	rough := (hi - lo) / xTickTarget
	mag := math.Pow(10, math.Floor(math.Log10(rough)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if rough <= m*mag {
			step = m * mag
			break
		}
	}
	start = math.Floor(lo/step) * step
	n = max(1, int(math.Ceil((hi-start)/step-1e-9)))
	return start, step, n
}

// tickDecimals is how many decimals show multiples of step exactly.
func tickDecimals(step float64) int {
	for d := 0; d < 10; d++ {
		v := step * math.Pow(10, float64(d))
		if math.Abs(v-math.Round(v)) < 1e-6*max(1, v) {
			return d
		}
	}
	return 10
}

// fillRect paints r (clipped to img) with c.
func fillRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, &image.Uniform{C: c}, image.Point{}, draw.Src)
}

// strokeRect draws r's one-pixel outline in c.
func strokeRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), c)
	fillRect(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), c)
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), c)
	fillRect(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), c)
}

// hLine draws a two-pixel-thick horizontal line from x0 to x1 at y,
// clipped to clip.
func hLine(img *image.RGBA, clip image.Rectangle, x0, x1, y int, c color.RGBA) {
	x0, x1 = min(x0, x1), max(x0, x1)
	fillRect(img, image.Rect(x0, y-1, x1+1, y+1).Intersect(clip), c)
}

// vLine draws a two-pixel-thick vertical line from y0 to y1 at x,
// clipped to clip.
func vLine(img *image.RGBA, clip image.Rectangle, x, y0, y1 int, c color.RGBA) {
	y0, y1 = min(y0, y1), max(y0, y1)
	fillRect(img, image.Rect(x-1, y0, x+1, y1+1).Intersect(clip), c)
}

// textWidth is the width in pixels of s drawn by drawText.
func textWidth(s string) int {
	n := len([]rune(s))
	if n == 0 {
		return 0
	}
	return n*glyphAdvance - textScale
}

// drawText draws s with its top-left corner at (x, y) in plotFont,
// magnified textScale times. Lower case is drawn as upper case and
// characters without a glyph as '?'.
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		g, ok := plotFont[unicode.ToUpper(r)]
		if !ok {
			g = plotFont['?']
		}
		for row, bits := range g {
			for col, b := range bits {
				if b == '#' {
					px, py := x+col*textScale, y+row*textScale
					fillRect(img, image.Rect(px, py, px+textScale, py+textScale), c)
				}
			}
		}
		x += glyphAdvance
	}
}

// writePNGAtomic encodes img as a PNG and replaces path with it (through
// a temporary file), so that readers never see a partial file.
func writePNGAtomic(path string, img image.Image) error {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("encode PNG for %s: %w", path, err)
	}
	if err := fsutil.WriteFile(path, buf.Bytes(), false); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Chmod(path, 0o644) // WriteFile's temporary files are private
}

// plotFont is a 5x7 bitmap font, one string of 5 pixels ('#' set, '.'
// clear) per row, for upper-case letters, digits and the punctuation plot
// text needs. golang.org/x/image is not among the module's dependencies,
// so the plot carries its own font.
var plotFont = map[rune][glyphRows]string{
	' ': {".....", ".....", ".....", ".....", ".....", ".....", "....."},
	'0': {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."},
	'1': {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'2': {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"},
	'3': {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."},
	'4': {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."},
	'5': {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."},
	'6': {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."},
	'7': {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."},
	'8': {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."},
	'9': {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."},
	'A': {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'B': {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."},
	'C': {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."},
	'D': {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."},
	'E': {"#####", "#....", "#....", "####.", "#....", "#....", "#####"},
	'F': {"#####", "#....", "#....", "####.", "#....", "#....", "#...."},
	'G': {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"},
	'H': {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'I': {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'J': {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."},
	'K': {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"},
	'L': {"#....", "#....", "#....", "#....", "#....", "#....", "#####"},
	'M': {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"},
	'N': {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"},
	'O': {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'P': {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."},
	'Q': {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"},
	'R': {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"},
	'S': {".####", "#....", "#....", ".###.", "....#", "....#", "####."},
	'T': {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."},
	'U': {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'V': {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."},
	'W': {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."},
	'X': {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"},
	'Y': {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."},
	'Z': {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"},
	'.': {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."},
	',': {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."},
	'-': {".....", ".....", ".....", "#####", ".....", ".....", "....."},
	'+': {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."},
	'=': {".....", ".....", "#####", ".....", "#####", ".....", "....."},
	'/': {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."},
	'(': {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."},
	')': {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."},
	'_': {".....", ".....", ".....", ".....", ".....", ".....", "#####"},
	':': {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."},
	'%': {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"},
	'?': {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."},
}
