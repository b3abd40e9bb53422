# veyyon prelude (Ruby)
# frozen_string_literal: true

# The helpers every Ruby kernel starts with. Standard library only, Ruby 2.7+. The host sends
# this source as one silent request right after init; the runner evaluates it in the cells'
# binding, so it defines no local variables. Running it again changes nothing: everything is
# defined under `unless defined?(::Veyyon::Prelude)`.
#
# Public names (private methods of Kernel, so they work in any method a cell defines):
#   kv.set(key, value) / kv[key] = value, kv.get(key, default = nil) / kv[key], kv.key?(key),
#   kv.list -> [String], kv.delete(key) -> true | false
#   defs -> Veyyon::Prelude::Definitions            name -> shape, sorted, at most 200
#   env(key = nil, value = nil)                     all variables, one, or set one (printing it)
#   agent(prompt, agent: "deep", model: nil, label: nil, schema: nil, handle: false,
#         isolated: nil, apply: nil, merge: nil)    -> String | parsed output | Hash (handle)
#   completion(prompt, model: nil, schema: nil)     -> String | parsed output
#   gets, $stdin.gets / readline / read / each_line  a line the host asks a person for (one
#                                                   "input" bridge call each); nil at end of input
# agent and completion send one "agent"/"completion" bridge call with the same params as
# runner/prelude.py; its answer is a string or {"text" => ..., "output"? => ...}; with a
# schema the output (or the text, parsed as JSON, one ``` fence allowed) is checked against it.
#
# kv is the store runner/prelude.py and runner/prelude.mjs use, so a key one runtime writes
# the others read: $VEYYON_ARTIFACTS_DIR/kv/<lowercase hex SHA-256 of the key's UTF-8>.json,
# holding {"key": <key>, "value": <value>} as compact UTF-8 JSON. Reads come straight from
# those files. Writes go to the host as one "kv" bridge call ({"op" => "set", "key" => key,
# "value" => <the value's JSON text>} or {"op" => "delete", "key" => key}); the host checks the
# limits for the whole store and writes. Keys have 1-256 code points without "/", "\" or NUL;
# one value's JSON is at most 256 KiB; all entries together at most 4 MiB. Values are plain
# JSON: Hash (String or Symbol keys), Array, String, Integer, finite Float, true, false, nil.
# With VEYYON_KV_READS=host in the environment (the host sets it when the store is not these
# files, e.g. a cluster's database) reads are "kv" bridge calls too: {"op" => "get", "key" =>
# key} answers the value's JSON text or nil, {"op" => "list"} the keys sorted by code point.

unless defined?(::Veyyon::Prelude)
  require "digest"
  require "json"

  module Veyyon
    # The prelude's implementation; the public names are thin Kernel methods below.
    module Prelude
      KV_KEY_MAX = 256
      KV_VALUE_MAX = 256 * 1024
      KV_FILE = /\A[0-9a-f]{64}\.json\z/.freeze
      DEFS_LIMIT = 200
      AGENT_SCHEME = "agent://"
      FENCE = /\A```[\w+-]*[ \t]*\n(.*?)\n?```\z/m.freeze
      JSON_TYPES = %w[object array string number integer boolean null].freeze

      module_function

      def clip(text, limit)
        flat = text.to_s.split.join(" ")
        flat.length <= limit ? flat : "#{flat[0, limit - 3]}..."
      end

      # Why value is not plain JSON, or nil when it is.
      def json_problem(value, path = "value", depth = 0)
        return "#{path} nests too deeply" if depth > 512

        case value
        when nil, true, false, Integer then nil
        when Float then value.finite? ? nil : "#{path} is #{value}, which JSON cannot hold"
        when String then value.dup.force_encoding(Encoding::UTF_8).valid_encoding? ? nil : "#{path} is not valid UTF-8"
        when Array
          value.each_with_index { |v, i| (p = json_problem(v, "#{path}[#{i}]", depth + 1)) && (return p) }
          nil
        when Hash
          value.each do |k, v|
            return "#{path} has a #{k.class} key; JSON object keys are Strings" unless k.is_a?(String) || k.is_a?(Symbol)

            (p = json_problem(v, "#{path}[#{k.to_s.inspect}]", depth + 1)) && (return p)
          end
          nil
        else "#{path} is a #{value.class}"
        end
      end

      # ------------------------------------------------------------------------------------
      # kv

      def check_kv_key(key)
        raise TypeError, "kv keys are Strings, not #{key.class}" unless key.is_a?(String)
        raise ArgumentError, "kv keys must be valid UTF-8: #{clip(key.inspect, 60)}" unless key.dup.force_encoding(Encoding::UTF_8).valid_encoding?

        text = key.dup.force_encoding(Encoding::UTF_8)
        length = text.length
        raise ArgumentError, "kv keys have 1 to #{KV_KEY_MAX} characters; this one has #{length}" unless length.between?(1, KV_KEY_MAX)

        [["/", '"/"'], ["\\", '"\\"'], ["\0", "NUL"]].each do |bad, name|
          raise ArgumentError, "kv keys may not contain #{name}: #{clip(text, 60).inspect}" if text.include?(bad)
        end
        text
      end

      def encode_kv_value(key, value)
        problem = json_problem(value)
        raise TypeError, "kv values must be JSON (Hash, Array, String, Integer, finite Float, true, false, nil): #{problem}" if problem

        data = JSON.generate(value)
        if data.bytesize > KV_VALUE_MAX
          raise ArgumentError, "kv value for #{clip(key, 60).inspect} encodes to #{data.bytesize} bytes; one value may have at most #{KV_VALUE_MAX} (256 KiB)"
        end
        data
      end

      def kv_file_name(key)
        "#{Digest::SHA256.hexdigest(key.b)}.json"
      end

      def kv_directory
        root = ENV["VEYYON_ARTIFACTS_DIR"]
        raise "kv needs VEYYON_ARTIFACTS_DIR, the session's artifacts directory, and it is not set" if root.nil? || root.empty?

        File.join(root, "kv")
      end

      # [key, value] of an entry file's bytes; ArgumentError when they are not an entry (for key).
      def decode_kv_entry(data, key = nil)
        entry = begin
          JSON.parse(data.force_encoding(Encoding::UTF_8))
        rescue JSON::ParserError, EncodingError => e
          raise ArgumentError, "kv entry is not JSON: #{e.message}"
        end
        raise ArgumentError, 'kv entry is not an object with "key" and "value"' unless entry.is_a?(Hash) && entry["key"].is_a?(String) && entry.key?("value")
        raise ArgumentError, "kv entry holds key #{clip(entry['key'], 60).inspect}, not #{clip(key, 60).inspect}" if key && entry["key"] != key

        [entry["key"], entry["value"]]
      end

      # Whether kv reads go to the host (VEYYON_KV_READS=host) instead of the files.
      def host_reads?
        ENV["VEYYON_KV_READS"] == "host"
      end

      def host_kv(params)
        Veyyon.bridge_call("kv", params)
      rescue Veyyon::BridgeError => e
        raise ArgumentError, e.reason if %w[KvInvalid KvStoreFull].include?(e.name)

        raise
      end

      # JSON values under $VEYYON_ARTIFACTS_DIR/kv/, one file per key, shared with Python and JavaScript cells.
      class KvStore
        MISSING = Object.new.freeze

        # Stores value (JSON) under key, replacing what was there.
        def set(key, value)
          key = Prelude.check_kv_key(key)
          Prelude.host_kv("op" => "set", "key" => key, "value" => Prelude.encode_kv_value(key, value))
          nil
        end

        # The value stored under key (a fresh copy), or default when there is none.
        def get(key, default = nil)
          key = Prelude.check_kv_key(key)
          if Prelude.host_reads?
            text = Prelude.host_kv("op" => "get", "key" => key)
            return text.nil? ? default : JSON.parse(text)
          end
          data = begin
            File.binread(File.join(Prelude.kv_directory, Prelude.kv_file_name(key)))
          rescue Errno::ENOENT
            return default
          end
          begin
            Prelude.decode_kv_entry(data, key)[1]
          rescue ArgumentError => e
            raise ArgumentError, "kv entry for #{Prelude.clip(key, 60).inspect} is damaged (#{e.message})"
          end
        end

        def [](key)
          get(key)
        end

        def []=(key, value)
          set(key, value)
        end

        # Whether key is stored.
        def key?(key)
          !get(key, MISSING).equal?(MISSING)
        end
        alias include? key?

        # The stored keys, sorted.
        def list
          return Prelude.host_kv("op" => "list").to_a if Prelude.host_reads?

          directory = Prelude.kv_directory
          names = begin
            Dir.children(directory).grep(KV_FILE)
          rescue Errno::ENOENT
            []
          end
          names.filter_map do |name|
            Prelude.decode_kv_entry(File.binread(File.join(directory, name)))[0]
          rescue SystemCallError, ArgumentError
            nil
          end.sort
        end

        # Removes key; true when it was stored.
        def delete(key)
          key = Prelude.check_kv_key(key)
          Prelude.host_kv("op" => "delete", "key" => key) == true
        end

        def inspect
          count = list.size
          "<kv store: #{count} key#{count == 1 ? '' : 's'}>"
        rescue RuntimeError
          "<kv store: VEYYON_ARTIFACTS_DIR is not set>"
        end
        alias to_s inspect
      end

      KV = KvStore.new

      # ------------------------------------------------------------------------------------
      # defs and env

      # What defs returns: name -> shape in name order; shown as one "name: shape" line each.
      class Definitions < Hash
        attr_accessor :omitted

        def inspect
          lines = map { |name, shape| "#{name}: #{shape}" }
          lines << "... and #{omitted} more" if omitted.to_i.positive?
          lines.empty? ? "(no user definitions)" : lines.join("\n")
        end
        alias to_s inspect
      end

      def signature(callable)
        names = callable.parameters.map do |kind, name|
          case kind
          when :req then name.to_s
          when :opt then "#{name} = ..."
          when :rest then "*#{name}"
          when :keyreq then "#{name}:"
          when :key then "#{name}: ..."
          when :keyrest then "**#{name}"
          when :block then "&#{name}"
          else name.to_s
          end
        end
        clip("(#{names.join(', ')})", 60)
      end

      # A short description of value: method(x), Array[3], Integer = 5, class, module.
      def value_shape(value)
        case value
        when UnboundMethod, Method then "method#{signature(value)}"
        when Proc then "#{value.lambda? ? 'lambda' : 'proc'}#{signature(value)}"
        when Class then "class"
        when Module then "module"
        when nil, true, false, Numeric then "#{value.class} = #{clip(value.inspect, 40)}"
        when String, Array, Hash then "#{value.class}[#{value.size}]"
        else
          value.respond_to?(:size) && value.size.is_a?(Integer) ? "#{value.class}[#{value.size}]" : value.class.to_s
        end
      rescue StandardError
        value.class.to_s
      end

      def defs
        names = Veyyon::Runtime.runner.user_definitions
        shown = Definitions.new
        names.first(DEFS_LIMIT).each { |name, value| shown[name] = value_shape(value) }
        shown.omitted = [0, names.size - DEFS_LIMIT].max
        shown
      end

      def env(key, value)
        if key.nil?
          raise ArgumentError, "env needs a key to set a value" unless value.nil?

          return ENV.to_h
        end
        key = key.to_s
        raise ArgumentError, "environment variable names are non-empty without '=' or NUL, not #{key.inspect}" if key.empty? || key.include?("=") || key.include?("\0")

        if value.nil?
          raise KeyError, "environment variable #{key} is not set" unless ENV.key?(key)

          return ENV[key]
        end
        ENV[key] = value.to_s
        puts "env: #{key}=#{value}"
        nil
      end

      # ------------------------------------------------------------------------------------
      # agent and completion

      # An answer that is not valid JSON or not of the schema's shape; #text holds the raw answer.
      class SchemaError < ArgumentError
        attr_reader :text, :problem

        def initialize(message, text = nil, problem = nil)
          super(message)
          @text = text
          @problem = problem
        end
      end

      def json_type(value)
        case value
        when nil then "null"
        when true, false then "boolean"
        when Integer then "integer"
        when Float then "number"
        when String then "string"
        when Array then "array"
        when Hash then "object"
        else value.class.to_s
        end
      end

      def type_matches?(value, name)
        actual = json_type(value)
        actual == name || (name == "number" && actual == "integer") || (name == "integer" && actual == "number" && value == value.floor)
      end

      # The first way value breaks schema, as "path: what is wrong", or nil when it fits.
      def schema_problem(value, schema, path = "$")
        return nil unless schema.is_a?(Hash)

        expected = schema["type"]
        unless expected.nil?
          names = Array(expected)
          return "#{path}: expected #{names.join(' or ')}, got #{json_type(value)}" unless names.any? { |n| type_matches?(value, n) }
        end
        options = schema["enum"]
        return "#{path}: #{clip(JSON.generate(value), 60)} is not one of #{clip(JSON.generate(options), 60)}" if options.is_a?(Array) && !options.include?(value)

        if value.is_a?(Hash)
          (schema["required"] || []).each { |name| return "#{path}: missing required property #{JSON.generate(name)}" unless value.key?(name) }
          (schema["properties"].is_a?(Hash) ? schema["properties"] : {}).each do |name, sub|
            next unless value.key?(name)

            problem = schema_problem(value[name], sub, "#{path}.#{name}")
            return problem if problem
          end
        elsif value.is_a?(Array)
          items = schema["items"]
          value.each_with_index do |item, index|
            sub = items.is_a?(Array) ? items[index] : items
            problem = schema_problem(item, sub, "#{path}[#{index}]")
            return problem if problem
          end
        end
        nil
      end

      def check_schema(schema)
        raise TypeError, "schema must be a Hash (a JSON Schema object), not #{schema.class}" unless schema.is_a?(Hash)

        problem = json_problem(schema, "schema")
        raise TypeError, "schema must be JSON: #{problem}" if problem

        expected = schema["type"] || schema[:type]
        names = expected.is_a?(String) ? [expected] : expected
        return if names.nil? || (names.is_a?(Array) && names.all? { |n| JSON_TYPES.include?(n) })

        raise TypeError, "schema type must be one of #{JSON_TYPES.join(', ')} (or an Array of them), got #{expected.inspect}"
      end

      def parse_json_answer(text, what)
        body = text.strip
        fenced = body.start_with?("```") ? FENCE.match(body) : nil
        body = fenced[1].strip if fenced
        JSON.parse(body)
      rescue JSON::ParserError => e
        raise SchemaError.new("#{what} is not valid JSON (#{e.message.lines.first.to_s.strip}); it begins #{clip(text, 80).inspect}", text, e.message)
      end

      def structured_answer(answer, schema, what)
        output = answer["output"]
        data = !output.nil? && !output.is_a?(String) ? output : parse_json_answer(answer["text"], what)
        problem = schema_problem(data, JSON.parse(JSON.generate(schema)))
        raise SchemaError.new("#{what} does not match the schema: #{problem}", answer["text"], problem) if problem

        data
      end

      def read_answer(method, value)
        return { "text" => value } if value.is_a?(String)
        return value if value.is_a?(Hash) && value["text"].is_a?(String)

        raise Veyyon::BridgeError.new("ProtocolError", "the host answered #{method}() with #{clip(JSON.generate(value), 60)}; expected a string or an object with a \"text\" string")
      end

      def require_text(name, value, optional: false)
        return if value.nil? && optional
        return if value.is_a?(String) && !value.strip.empty?

        raise TypeError, "#{name} must be #{optional ? 'nil or ' : ''}a non-empty String, not #{clip(value.inspect, 40)}"
      end

      def require_flag(name, value)
        raise TypeError, "#{name} must be true, false or nil, not #{value.inspect}" unless [nil, true, false].include?(value)
      end

      def agent(prompt, agent:, model:, label:, schema:, handle:, isolated:, apply:, merge:)
        require_text("prompt", prompt)
        require_text("agent", agent)
        require_text("model", model, optional: true)
        require_text("label", label, optional: true)
        check_schema(schema) unless schema.nil?
        raise TypeError, "handle must be true or false, not #{handle.inspect}" unless [true, false].include?(handle)

        require_flag("isolated", isolated)
        require_flag("apply", apply)
        raise TypeError, "merge must be a String, true, false or nil, not #{merge.class}" unless [nil, true, false].include?(merge) || merge.is_a?(String)

        params = { "prompt" => prompt, "agent" => agent, "model" => model, "label" => label, "schema" => schema,
                   "isolated" => isolated, "apply" => apply, "merge" => merge }
        answer = read_answer("agent", Veyyon.bridge_call("agent", params))
        data = schema.nil? ? nil : structured_answer(answer, schema, "agent() output")
        return(schema.nil? ? answer["text"] : data) unless handle

        id = answer["id"]
        node = { "text" => answer["text"], "output" => answer.fetch("output", answer["text"]),
                 "handle" => id.nil? || id == "" ? nil : "#{AGENT_SCHEME}#{id}", "id" => id,
                 "agent" => answer["agent"] || agent }
        node["data"] = data unless schema.nil?
        node
      end

      def completion(prompt, model:, schema:)
        require_text("prompt", prompt)
        require_text("model", model, optional: true)
        check_schema(schema) unless schema.nil?
        answer = read_answer("completion", Veyyon.bridge_call("completion", { "prompt" => prompt, "model" => model, "schema" => schema }))
        schema.nil? ? answer["text"] : structured_answer(answer, schema, "completion() output")
      end
    end

    # $stdin in a kernel: the protocol does not travel on standard input, so each line a cell
    # reads is asked of the host ("input" bridge call); nil (end of input) when none comes.
    class HostStdin
      def gets(*_args)
        line = Veyyon.bridge_call("input", { "prompt" => "" })
        line.is_a?(String) ? "#{line}\n" : "\n"
      rescue Veyyon::BridgeError => e
        raise unless e.name == "EOFError"

        nil
      end

      def readline(*args)
        gets(*args) || raise(EOFError, "end of input: nothing answered the cell's read")
      end

      def read(*_args)
        gets || ""
      end

      def each_line
        return enum_for(:each_line) unless block_given?

        while (line = gets)
          yield line
        end
        self
      end

      def readlines(*_args)
        each_line.to_a
      end

      def eof?
        false
      end

      def tty?
        false
      end
      alias isatty tty?

      def fileno
        0
      end
    end
  end

  $stdin = Veyyon::HostStdin.new

  # Kernel#gets reads ARGF; with no files named it reads the host's line, as $stdin.gets does.
  class ::Object
    private

    def gets(*args)
      ARGV.empty? && $stdin.is_a?(Veyyon::HostStdin) ? $stdin.gets(*args) : super
    end
  end

  module Kernel
    private

    # The session's kv store (see runner/ruby/prelude.rb).
    def kv
      Veyyon::Prelude::KV
    end

    # Names your cells defined (sorted, at most 200), each with a short shape of its value.
    def defs
      Veyyon::Prelude.defs
    end

    # All environment variables (no key), one variable's value (key), or set key to value (printing it).
    def env(key = nil, value = nil)
      Veyyon::Prelude.env(key, value)
    end

    # Runs one subagent on the host and returns its final text (schema: the parsed output; handle: a node Hash).
    def agent(prompt, agent: "deep", model: nil, label: nil, schema: nil, handle: false, isolated: nil, apply: nil, merge: nil)
      Veyyon::Prelude.agent(prompt, agent: agent, model: model, label: label, schema: schema, handle: handle,
                                    isolated: isolated, apply: apply, merge: merge)
    end

    # Asks the host's model for one completion and returns its text (with schema, the parsed output).
    def completion(prompt, model: nil, schema: nil)
      Veyyon::Prelude.completion(prompt, model: model, schema: schema)
    end
  end
end
