python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
L=/tmp/l; mkdir -p $L /tmp/mm
pack() { tar czf $OUT/call5.tgz -C /tmp l 2>/dev/null; }
timeout 70 python3 benchmarks/side_stream_probe.py --out $L/side_stream.json > $L/side_stream.log 2>&1; cat $L/side_stream.log | cut -c1-700; pack
timeout 95 python3 benchmarks/offline_gpu_check.py 'sd35_addmm_*' --out /tmp/mm/addmm.json --override 'platform.baselines=[eager,compile]' > $L/addmm_check.log 2>&1; cp /tmp/mm/addmm.json $L/; tail -20 $L/addmm_check.log | cut -c1-250; pack
