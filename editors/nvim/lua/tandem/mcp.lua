-- MCP servers: `:TandemMcp` lists the chat session's servers (state, error,
-- tools) from `tandem/listMcpServers`; `:checkhealth tandem` shows the same.
local client = require('tandem.client')

local M = {}

--- One line per server and one per tool, for people.
function M.lines(servers)
  if #servers == 0 then
    return { 'no MCP servers (configure [mcp_servers.<name>] in config.toml)' }
  end
  local lines = {}
  for _, server in ipairs(servers) do
    local head = server.name .. ': ' .. server.state
    if server.error then
      head = head .. ' (' .. server.error .. ')'
    end
    table.insert(lines, head .. ', ' .. #server.tools .. ' tools')
    for _, tool in ipairs(server.tools) do
      table.insert(lines, '  ' .. tool.name .. (tool.readOnly and ' (read-only)' or ''))
    end
  end
  return lines
end

--- Asks for the servers (the chat session's when it has one, else every
--- server the daemon runs); `on_result(err, servers)`.
function M.list(on_result)
  local id = require('tandem.session').id()
  client.request('tandem/listMcpServers', id and { sessionId = id } or {}, function(err, result)
    on_result(err, result and result.servers or {})
  end)
end

--- `:TandemMcp`: the list in a scratch buffer.
function M.show()
  M.list(function(err, servers)
    if err then
      return vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    vim.schedule(function()
      vim.cmd('botright new')
      local buf = vim.api.nvim_get_current_buf()
      vim.bo[buf].buftype = 'nofile'
      vim.bo[buf].bufhidden = 'wipe'
      vim.api.nvim_buf_set_name(buf, 'tandem://mcp')
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.lines(servers))
      vim.bo[buf].modifiable = false
    end)
  end)
end

--- The `:checkhealth tandem` section (only once the daemon runs).
function M.check(health)
  health.start('tandem: MCP servers')
  if not client.get() then
    return health.info('the daemon is not running yet')
  end
  local done, err, servers = false, nil, {}
  M.list(function(e, s)
    done, err, servers = true, e, s
  end)
  vim.wait(2000, function()
    return done
  end, 10)
  if not done or err then
    return health.warn('tandem/listMcpServers: ' .. (err and err.message or 'no answer within 2 s'))
  end
  if #servers == 0 then
    return health.info('none configured')
  end
  for _, server in ipairs(servers) do
    local line = server.name .. ': ' .. server.state .. ', ' .. #server.tools .. ' tools'
    if server.state == 'failed' then
      health.error(line .. ' (' .. tostring(server.error) .. ')', { 'see the daemon log and :TandemMcp' })
    elseif server.state == 'ready' then
      health.ok(line)
    else
      health.info(line)
    end
  end
end

return M
