#include "parallel/comm/routed_communicator.h"

#include "core/error.h"

namespace tessera::parallel {

RoutedCommunicator::RoutedCommunicator(std::shared_ptr<Communicator> host,
                                       std::shared_ptr<Communicator> device,
                                       const std::string& name)
    : Communicator(name.empty() && host ? host->name() : name),
      host_(std::move(host)),
      device_(std::move(device)) {
  TS_CHECK(host_ != nullptr, "comm", "expected a host communicator to route over, got null");
  set_timeout_s(host_->timeout_s());
  backend_ = host_->backend();
  if (!device_) return;
  TS_CHECK(device_->rank() == host_->rank() && device_->size() == host_->size(), "comm",
           "expected the device communicator on the host's ranks: rank ", host_->rank(), " of ",
           host_->size(), " in '", host_->name(), "', got rank ", device_->rank(), " of ",
           device_->size(), " in '", device_->name(), "'");
  TS_CHECK(device_->device_type() != host_->device_type(), "comm",
           "expected the device communicator to move another device type than the host's ",
           host_->backend(), ", got ", device_->backend());
  backend_ += std::string("+") + device_->backend();
}

bool RoutedCommunicator::supports(DeviceType type) const {
  return host_->supports(type) || (device_ && device_->supports(type));
}

Communicator& RoutedCommunicator::backend_for(const Tensor& t) const {
  return device_ && device_->supports(t.device().type) ? *device_ : *host_;
}

std::shared_ptr<Communicator> RoutedCommunicator::split(int color, int key,
                                                        const std::string& name) {
  const std::string sub_name = name.empty() ? str_cat(this->name(), "/", color) : name;
  // Both backends split collectively, every rank in the same order: host first, then device.
  std::shared_ptr<Communicator> host = host_->split(color, key, sub_name);
  std::shared_ptr<Communicator> device = device_ ? device_->split(color, key, sub_name) : nullptr;
  if (host == nullptr) return nullptr;
  return std::make_shared<RoutedCommunicator>(std::move(host), std::move(device), sub_name);
}

WorkPtr RoutedCommunicator::do_all_reduce(const Tensor& t, ReduceOp op) {
  return backend_for(t).do_all_reduce(t, op);
}

WorkPtr RoutedCommunicator::do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  return backend_for(in).do_reduce_scatter(in, out, op);
}

WorkPtr RoutedCommunicator::do_all_gather(const Tensor& in, const Tensor& out) {
  return backend_for(in).do_all_gather(in, out);
}

WorkPtr RoutedCommunicator::do_broadcast(const Tensor& t, int root) {
  return backend_for(t).do_broadcast(t, root);
}

WorkPtr RoutedCommunicator::do_reduce(const Tensor& t, int root, ReduceOp op) {
  return backend_for(t).do_reduce(t, root, op);
}

WorkPtr RoutedCommunicator::do_all_to_all(const Tensor& in, const Tensor& out) {
  return backend_for(in).do_all_to_all(in, out);
}

WorkPtr RoutedCommunicator::do_send(const Tensor& t, int peer, int tag) {
  return backend_for(t).do_send(t, peer, tag);
}

WorkPtr RoutedCommunicator::do_recv(const Tensor& t, int peer, int tag) {
  return backend_for(t).do_recv(t, peer, tag);
}

WorkPtr RoutedCommunicator::do_batch_send_recv(const std::vector<P2POp>& ops) {
  // Communicator::batch_send_recv has checked that the batch is on one device type.
  return ops.empty() ? host_->do_batch_send_recv(ops)
                     : backend_for(ops.front().tensor).do_batch_send_recv(ops);
}

WorkPtr RoutedCommunicator::do_barrier() { return host_->do_barrier(); }

}  // namespace tessera::parallel
