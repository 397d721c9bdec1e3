-- wrk script for bench/run_listen_replay.sh: POST a ~1 KB Stripe-like event
-- with a distinct Idempotency-Key per request, as a provider delivering
-- webhooks would.
local body = '{"id":"evt_1OqZ","object":"event","api_version":"2024-06-20","created":1764489600,' ..
  '"type":"charge.succeeded","livemode":false,"pending_webhooks":1,' ..
  '"request":{"id":"req_8f3a","idempotency_key":"b9f3c2d4"},' ..
  '"data":{"object":{"id":"ch_3OqZ","object":"charge","amount":2000,"currency":"usd",' ..
  '"customer":"cus_Q1","description":"order 4242","paid":true,"status":"succeeded",' ..
  '"metadata":{"order_id":"4242","source":"checkout"},' ..
  '"billing_details":{"address":{"city":"Berlin","country":"DE","line1":"Unter den Linden 1",' ..
  '"postal_code":"10117"},"email":"jenny@example.com","name":"Jenny Rosen"},' ..
  '"payment_method_details":{"card":{"brand":"visa","country":"US","exp_month":12,' ..
  '"exp_year":2030,"last4":"4242","network":"visa"},"type":"card"},' ..
  '"receipt_url":"https://pay.stripe.com/receipts/payment/CAcaFwoVYWNjdF8xTzVa"}}}'
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("POST", "/hooks/stripe", {
    ["Content-Type"] = "application/json",
    ["Stripe-Signature"] = "t=1764489600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
    ["Idempotency-Key"] = "k" .. counter,
  }, body)
end
