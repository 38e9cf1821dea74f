-- wrk script for the simulator's throughput (docs/BENCHMARKS.md):
--   wamux sim --listen 127.0.0.1:18090 --number 1001:bench-token --rate 1000000
--   wrk -t1 -c32 -d20s -s sim/loadtest/send.lua http://127.0.0.1:18090
-- Every request has its own recipient and callback data, so the pair limit
-- and the duplicate check do real work but never reject.
local counter = 0
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
function init(args)
  n = 0
end
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer bench-token"
wrk.headers["Content-Type"] = "application/json"
function request()
  n = n + 1
  local to = string.format("1%02d%09d", tid, n)
  local body = '{"messaging_product":"whatsapp","recipient_type":"individual","to":"' .. to ..
    '","type":"text","text":{"preview_url":false,"body":"Your order has shipped."},"biz_opaque_callback_data":"bench-' .. tid .. '-' .. n .. '"}'
  return wrk.format(nil, "/v24.0/1001/messages", nil, body)
end
