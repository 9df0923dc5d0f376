# Written by dlock bench; redraw with: gnuplot throughput.gp (in this directory)
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 1000,620 noenhanced font 'sans,10'
} else {
  set terminal png size 1000,620 noenhanced
}
set output 'throughput.png'
set datafile missing '?'
set grid
set linetype 1 lc rgb '#6a3d9a'
set linetype 2 lc rgb '#009e73'
set linetype 3 lc rgb '#0072b2'
set linetype 4 lc rgb '#d55e00'
set linetype 5 lc rgb '#b8860b'
set linetype 6 lc rgb '#444444'
set linetype cycle 6
set title "Lock+unlock throughput against threads: simple lock, one key per thread\nredis://127.0.0.1:55775 (private redis-server 7.0.15), 3 s per measurement in 6 interleaved slices"
set xlabel 'threads sharing one dlock client  =  redis-benchmark clients (-c N)'
set ylabel 'lock+unlock pairs per second (higher is better)'
set logscale x 2
set offsets graph 0.05, graph 0.05, 0, 0
set yrange [0:*]
set key top left box opaque
plot 'throughput.dat' using 1:2:xtic(1) with linespoints lw 2 pt 7 ps 1.3 title 'dlock: one client, N threads', \
     '' using 1:3 with linespoints lw 2 pt 5 ps 1.3 title 'redis-benchmark -c N -P 1, same scripts', \
     '' using 1:4 with linespoints lw 2 dt 2 pt 9 ps 1.3 title 'redis-benchmark -c 50 -P 16 (ceiling), same scripts'
