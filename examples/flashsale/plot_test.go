package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"testing"
)

// decodePNG reads the PNG file path and checks its size.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("-plot wrote no file: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != plotWidth || b.Dy() != plotHeight {
		t.Fatalf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), plotWidth, plotHeight)
	}
	return img
}

// palette counts img's pixels by colour.
func palette(t *testing.T, img image.Image) map[color.NRGBA]int {
	t.Helper()
	// The canvas and the PNG decoder both give an RGBA (opaque here: no
	// premultiplying to undo); reading its bytes keeps the count fast
	// under -race.
	rgba, ok := img.(*image.RGBA)
	if !ok {
		t.Fatalf("decoded a %T, want *image.RGBA", img)
	}
	counts := map[uint32]int{}
	for i := 0; i+3 < len(rgba.Pix); i += 4 {
		p := rgba.Pix[i : i+4 : i+4]
		counts[uint32(p[0])<<24|uint32(p[1])<<16|uint32(p[2])<<8|uint32(p[3])]++
	}
	out := make(map[color.NRGBA]int, len(counts))
	for c, n := range counts {
		out[color.NRGBA{uint8(c >> 24), uint8(c >> 16), uint8(c >> 8), uint8(c)}] = n
	}
	return out
}

// checkDrawn fails unless img is a drawing: a white background, most of
// it, with lines and text in several colours on it.
func checkDrawn(t *testing.T, img image.Image) map[color.NRGBA]int {
	t.Helper()
	pal := palette(t, img)
	total := plotWidth * plotHeight
	white := pal[color.NRGBA{255, 255, 255, 255}]
	if white < total/3 || white > total*98/100 {
		t.Errorf("%d of %d pixels white: want a white background with a drawing on it", white, total)
	}
	// The series' colours, drawn with their own pixels (anti-aliasing adds
	// more shades of them).
	var series int
	for _, c := range []color.Color{plotColor(0), plotColor(1), plotColor(2), plotColor(3)} {
		if pal[color.NRGBAModel.Convert(c).(color.NRGBA)] > 100 {
			series++
		}
	}
	if len(pal) < 20 || series < 4 {
		t.Errorf("%d colours, %d of the first four series colours drawn: want a picture, not a blank", len(pal), series)
	}
	return pal
}

// blend is c at its alpha over white.
func blend(c color.NRGBA) color.NRGBA {
	mix := func(v uint8) uint8 { return uint8(255 - (255-int(v))*int(c.A)/255) }
	return color.NRGBA{mix(c.R), mix(c.G), mix(c.B), 255}
}

// near counts pixels of pal within 3 of want in every channel.
func near(pal map[color.NRGBA]int, want color.NRGBA) int {
	d := func(a, b uint8) bool { return int(a)-int(b) <= 3 && int(b)-int(a) <= 3 }
	n := 0
	for c, k := range pal {
		if d(c.R, want.R) && d(c.G, want.G) && d(c.B, want.B) {
			n += k
		}
	}
	return n
}

// fakeSale is a sale of two SKUs over 10s: Redis down from 3s to 5s, the
// breaker away from primary from 3.2s to 7s when down is set.
func fakeSale(down bool) []sample {
	var out []sample
	for i := 0; i <= 100; i++ {
		at := float64(i) / 10
		s := sample{at: at, available: []int64{int64(max(0, 100-i)), int64(max(0, 50-i/2))},
			attempts: make([]int64, len(outcomes)), queue: int64(i % 30), reclaimed: [2]int64{int64(i), int64(i / 4)}}
		for k := range s.attempts {
			s.attempts[k] = int64(i * (k + 1) * 10)
		}
		if down {
			s.redisDown = at >= 3 && at < 5
			switch {
			case at >= 3.2 && at < 5.5:
				s.breaker = 1
			case at >= 5.5 && at < 6:
				s.breaker = 2
			case at >= 6 && at < 7:
				s.breaker = 3
			}
		}
		out = append(out, s)
	}
	return out
}

// The picture shades the spells Redis was down and the breaker was not
// primary, and only those.
func TestPlotShadesSpells(t *testing.T) {
	t.Parallel()
	var pals [2]map[color.NRGBA]int
	for i, down := range []bool{false, true} {
		// The canvas itself: encoding and decoding the PNG takes seconds
		// under -race, and the sale's test checks the file.
		c, err := renderTimeline(fakeSale(down), []string{"sku-1", "sku-2"}, "test sale")
		if err != nil {
			t.Fatal(err)
		}
		img := c.Image()
		if b := img.Bounds(); b.Dx() != plotWidth || b.Dy() != plotHeight {
			t.Fatalf("canvas %dx%d, want %dx%d", b.Dx(), b.Dy(), plotWidth, plotHeight)
		}
		pals[i] = checkDrawn(t, img)
	}
	blue, red := blend(redisDownColor), blend(degradedColor)
	if n, m := near(pals[0], blue), near(pals[0], red); n != 0 || m != 0 {
		t.Errorf("a sale without faults has %d blue and %d red band pixels", n, m)
	}
	// 5 panels, each band 2s to 3.8s of the 10s axis wide and most of a
	// panel high: tens of thousands of pixels.
	if n, m := near(pals[1], blue), near(pals[1], red); n < 10000 || m < 10000 {
		t.Errorf("blue band %d pixels, red band %d: want both drawn", n, m)
	}
	t.Logf("band pixels: blue %d, red %d", near(pals[1], blue), near(pals[1], red))
}

func TestPlotNeedsTwoSamples(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	err := drawTimeline(&b, fakeSale(false)[:1], []string{"sku-1", "sku-2"}, "")
	if err == nil || b.Len() != 0 {
		t.Fatal("drew a sale of one sample")
	}
}

func TestSpells(t *testing.T) {
	t.Parallel()
	s := fakeSale(true)
	got := spells(s, func(x sample) bool { return x.redisDown })
	if len(got) != 1 || got[0] != [2]float64{3, 5} {
		t.Errorf("spells = %v, want [[3 5]]", got)
	}
	if got := spells(s[:40], func(x sample) bool { return x.breaker != 0 }); len(got) != 1 || got[0] != [2]float64{3.2, 3.9} {
		t.Errorf("an open spell = %v, want it closed at the last sample [[3.2 3.9]]", got)
	}
}
