# Written by dlock bench; redraw with: gnuplot latency_uncontended.gp (in this directory)
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 1400,660 noenhanced font 'sans,10'
} else {
  set terminal png size 1400,660 noenhanced
}
set output 'latency_uncontended.png'
set datafile missing '?'
set grid
set linetype 1 lc rgb '#6a3d9a'
set linetype 2 lc rgb '#009e73'
set linetype 3 lc rgb '#0072b2'
set linetype 4 lc rgb '#d55e00'
set linetype 5 lc rgb '#b8860b'
set linetype 6 lc rgb '#444444'
set linetype cycle 6
set multiplot layout 1,2 title "Uncontended lock+unlock: one pair's latency (µs)\nredis://127.0.0.1:55775 (private redis-server 7.0.15), 3 s per measurement in 6 interleaved slices\nsamples: dlock reentrant: 12192, dlock simple: 11735, dlock simple.try_acquire: 12251, raw SET NX PX + compare-and-delete: 14963, 2 x PING: 15514"
set key spacing 1.5
# Left: the distribution as a CDF.
set title 'CDF through the 99th percentile: share of samples at or below a latency'
set xlabel 'latency (µs, log scale)'
set logscale x
set xrange [93.56:953.39]
set xtics (100, 200, 500)
set ylabel 'percentile (%)'
set yrange [0:100]
set ytics 10
set key bottom right box opaque
plot 'latency_uncontended.dat' using 3:1 with linespoints lw 2 ps 0.6 pt 7 title 'dlock reentrant', \
     '' using 4:1 with linespoints lw 2 ps 0.6 pt 7 title 'dlock simple', \
     '' using 5:1 with linespoints lw 2 ps 0.6 pt 7 title 'dlock simple.try_acquire', \
     '' using 6:1 with linespoints lw 2 ps 0.6 pt 6 dt 2 title 'raw SET NX PX + compare-and-delete', \
     '' using 7:1 with linespoints lw 2 ps 0.6 pt 6 dt 2 title '2 x PING'
# Right: the tail, one decade of percentiles per step.
unset logscale x
unset arrow 1
set xtics auto
set title 'Tail: latency at each percentile'
set xlabel 'percentile (log scale of 1/(1 - p))'
set ylabel 'latency (µs, log scale)'
set logscale y
set yrange [*:*]
set ytics auto
set xrange [0:4]
set xtics ('0' 0, '50' log10(2), '90' 1, '99' 2, '99.9' 3, '99.99' 4)
set key top left box opaque
plot 'latency_uncontended.dat' using 2:(column(3) > 0 ? column(3) : NaN) with linespoints lw 2 ps 0.6 pt 7 title 'dlock reentrant', \
     '' using 2:(column(4) > 0 ? column(4) : NaN) with linespoints lw 2 ps 0.6 pt 7 title 'dlock simple', \
     '' using 2:(column(5) > 0 ? column(5) : NaN) with linespoints lw 2 ps 0.6 pt 7 title 'dlock simple.try_acquire', \
     '' using 2:(column(6) > 0 ? column(6) : NaN) with linespoints lw 2 ps 0.6 pt 6 dt 2 title 'raw SET NX PX + compare-and-delete', \
     '' using 2:(column(7) > 0 ? column(7) : NaN) with linespoints lw 2 ps 0.6 pt 6 dt 2 title '2 x PING'
unset multiplot
