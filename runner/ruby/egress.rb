# frozen_string_literal: true

# The in-sandbox egress forwarder: relays 127.0.0.1:<port> to the host's egress proxy socket.
#
# In a sandbox with `sandbox.network: allowlist` the kernel has its own network namespace with
# only a loopback interface; the host's egress proxy is a Unix socket bound into it. When the
# environment names that socket (VEYYON_EGRESS_SOCKET) and a port (VEYYON_EGRESS_PORT),
# VeyyonEgress.start listens on 127.0.0.1:<port> and relays every connection byte for byte to
# the socket, so clients configured through HTTP_PROXY/HTTPS_PROXY (Net::HTTP, gem) work
# unchanged. Background threads do the work, never report exceptions (nothing reaches the
# cell's stderr), and are never the target of the runner's Interrupt.

require "socket"

module VeyyonEgress
  SOCKET_ENV = "VEYYON_EGRESS_SOCKET"
  PORT_ENV = "VEYYON_EGRESS_PORT"
  CHUNK = 65_536

  module_function

  # Starts the forwarder when env names the socket and port; the listening server, or nil.
  def start(env, diagnose)
    path = env[SOCKET_ENV]
    port_text = env[PORT_ENV]
    return nil if path.nil? || path.empty? || port_text.nil? || port_text.empty?

    port = port_text.match?(/\A[0-9]{1,5}\z/) ? port_text.to_i : 0
    unless port.between?(1, 65_535)
      diagnose.call("egress forwarder not started: #{PORT_ENV}=#{port_text.inspect} is not a port from 1 to 65535")
      return nil
    end
    begin
      server = TCPServer.new("127.0.0.1", port)
    rescue SystemCallError, SocketError => e
      diagnose.call("egress forwarder not started: cannot listen on 127.0.0.1:#{port}: #{e.message}")
      return nil
    end
    background { serve(server, path) }
    server
  end

  def background(&block)
    Thread.new do
      Thread.current.name = "veyyon-egress"
      Thread.current.report_on_exception = false
      block.call
    rescue Exception # rubocop:disable Lint/RescueException
      nil
    end
  end

  def serve(server, path)
    loop do
      client = begin
        server.accept
      rescue IOError
        return
      rescue SystemCallError
        sleep 0.1
        next
      end
      background { relay(client, path) }
    end
  end

  def relay(client, path)
    upstream = UNIXSocket.new(path)
    back = background { pipe(upstream, client) }
    pipe(client, upstream)
    back.join
  rescue SystemCallError, IOError
    nil
  ensure
    client.close unless client.closed?
    upstream&.close unless upstream.nil? || upstream.closed?
  end

  def pipe(source, target)
    loop { target.write(source.readpartial(CHUNK)) }
  rescue EOFError, IOError, SystemCallError
    nil
  ensure
    begin
      target.close_write
    rescue IOError, SystemCallError
      nil
    end
  end
end
