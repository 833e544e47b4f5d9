module github.com/stockguard/stockguard/handoff/rabbitmq

go 1.26.0

require github.com/stockguard/stockguard v0.2.0

require github.com/rabbitmq/amqp091-go v1.17.0 // indirect

replace github.com/stockguard/stockguard v0.2.0 => ../..
